package io.npugather.spark.arrow.write;

import io.npugather.spark.arrow.ArrowBitmaps;
import io.npugather.spark.arrow.FixedWidthType;
import java.util.List;
import org.apache.arrow.memory.util.MemoryUtil;
import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.BaseVariableWidthVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.complex.ListVector;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.SpecializedGetters;
import org.apache.spark.sql.catalyst.expressions.UnsafeArrayData;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.execution.arrow.ArrowFieldWriter;
import org.apache.spark.sql.execution.arrow.ArrowWriter$;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.bitset.BitSetMethods;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Writes rows into the Arrow vectors of a {@link VectorSchemaRoot}, producing the same buffers as
 * Spark's {@code ArrowWriter}. Columns of a fixed-width type (boolean, byte, short, int, long,
 * float, double, date, timestamp, timestamp_ntz), strings, binaries and arrays of fixed-width
 * elements (feature vectors) are written straight from an {@link UnsafeRow}'s memory into the Arrow
 * buffers: no per-value object or vector call, a string or an array without null elements in one
 * memory copy. Every other column goes through Spark's own field writer.
 *
 * <p>The vectors are sized for the expected row count up front (and a list's elements for the
 * expected rows times the first array's length), so a correct estimate means no reallocation;
 * beyond it they grow as Arrow's vectors do. Not thread-safe.
 */
final class FixedWidthRowWriter {
  /** Rows allocated up front when the caller does not know the count. */
  static final int UNKNOWN_COUNT_CAPACITY = 1 << 14;

  private final Column[] columns;
  private final int bitSetWidth;
  private final int expectedRows;
  private int capacity;
  private int count;

  /**
   * Allocates {@code root}'s vectors.
   *
   * @param expectedRows rows expected, or a negative number if unknown
   */
  FixedWidthRowWriter(VectorSchemaRoot root, StructType schema, int expectedRows) {
    List<FieldVector> vectors = root.getFieldVectors();
    this.expectedRows = expectedRows;
    int initial = expectedRows < 0 ? UNKNOWN_COUNT_CAPACITY : Math.max(expectedRows, 1);
    columns = new Column[vectors.size()];
    for (int c = 0; c < columns.length; c++) {
      FieldVector v = vectors.get(c);
      DataType t = schema.fields()[c].dataType();
      FixedWidthType fixed = FixedWidthType.of(t);
      FixedWidthType elements = FixedWidthType.ofElements(t);
      if (fixed != null) {
        columns[c] = new FixedColumn(c, v, fixed);
      } else if (t instanceof StringType || t instanceof BinaryType) {
        columns[c] = new BytesColumn(c, (BaseVariableWidthVector) v, t instanceof StringType);
      } else if (elements != null) {
        columns[c] = new ListColumn(c, (ListVector) v, elements);
      } else {
        columns[c] = new FieldWriterColumn(c, v);
      }
      if (columns[c] instanceof ListColumn) {
        // Elements are sized by the first array (ListColumn.reserve), not by a guessed density.
        ((ListVector) v).setInitialCapacity(initial, 0.0);
      } else {
        v.setInitialCapacity(initial);
      }
      v.allocateNew();
      columns[c].reload();
    }
    bitSetWidth = UnsafeRow.calculateBitSetWidthInBytes(columns.length);
    capacity = directCapacity();
  }

  void write(InternalRow row) {
    if (count == capacity) {
      grow();
    }
    if (row instanceof UnsafeRow) {
      UnsafeRow u = (UnsafeRow) row;
      Object base = u.getBaseObject();
      long rowOffset = u.getBaseOffset();
      long values = rowOffset + bitSetWidth;
      for (Column c : columns) {
        if (BitSetMethods.isSet(base, rowOffset, c.ordinal)) {
          c.writeNull(row, count);
        } else {
          c.writeUnsafe(row, base, rowOffset, values + 8L * c.ordinal, count);
        }
      }
    } else {
      for (Column c : columns) {
        if (row.isNullAt(c.ordinal)) {
          c.writeNull(row, count);
        } else {
          c.write(row, count);
        }
      }
    }
    count++;
  }

  /** The rows a column sizes its values for when its first value arrives: the expected count. */
  private long rowsToSizeFor() {
    return Math.max(expectedRows < 0 ? UNKNOWN_COUNT_CAPACITY : expectedRows, 1);
  }

  /** Rows written. */
  int count() {
    return count;
  }

  /** Sets every vector's value count; the vectors are then ready to unload. */
  void finish() {
    for (Column c : columns) {
      c.finish(count);
    }
  }

  private void grow() {
    if (count == Integer.MAX_VALUE) {
      throw new IllegalArgumentException(
          "partition exceeds 2^31-1 rows, the limit of one Arrow batch");
    }
    for (Column c : columns) {
      c.growRows(count);
    }
    capacity = directCapacity();
  }

  /** Rows that fit in every directly written vector (Spark's field writers grow their own). */
  private int directCapacity() {
    int cap = Integer.MAX_VALUE;
    for (Column c : columns) {
      if (!(c instanceof FieldWriterColumn)) {
        cap = Math.min(cap, c.vector.getValueCapacity());
      }
    }
    return cap;
  }

  /**
   * Copies value {@code index} of a column of {@code width} ({@link FixedWidthType#width}) from
   * {@code base} + {@code from} (Spark's unsafe layout) into the Arrow data buffer at {@code data}.
   */
  private static void copyValue(int width, Object base, long from, long data, long index) {
    switch (width) {
      case 8:
        MemoryUtil.putLong(data + 8L * index, Platform.getLong(base, from));
        break;
      case 4:
        MemoryUtil.putInt(data + 4L * index, Platform.getInt(base, from));
        break;
      case 2:
        MemoryUtil.putShort(data + 2L * index, Platform.getShort(base, from));
        break;
      case 1:
        MemoryUtil.putByte(data + index, Platform.getByte(base, from));
        break;
      default:
        if (Platform.getBoolean(base, from)) {
          ArrowBitmaps.setBit(data, index);
        }
    }
  }

  /** Writes value {@code ordinal} of {@code g} through its getter, as {@link #copyValue}. */
  private static void putValue(
      int width, boolean floating, SpecializedGetters g, int ordinal, long data, long index) {
    switch (width) {
      case 8:
        MemoryUtil.putLong(
            data + 8L * index,
            floating ? Double.doubleToRawLongBits(g.getDouble(ordinal)) : g.getLong(ordinal));
        break;
      case 4:
        MemoryUtil.putInt(
            data + 4L * index,
            floating ? Float.floatToRawIntBits(g.getFloat(ordinal)) : g.getInt(ordinal));
        break;
      case 2:
        MemoryUtil.putShort(data + 2L * index, g.getShort(ordinal));
        break;
      case 1:
        MemoryUtil.putByte(data + index, g.getByte(ordinal));
        break;
      default:
        if (g.getBoolean(ordinal)) {
          ArrowBitmaps.setBit(data, index);
        }
    }
  }

  /**
   * Copies the {@code n} elements of an {@link UnsafeArrayData} of fixed-width elements ({@link
   * FixedWidthType#width}), its null bitset at {@code nulls} and values at {@code values} in {@code
   * base}, into an Arrow list's element vector (validity at {@code childValidity}, data at {@code
   * childData}) from element {@code from} on: one memory copy when no element is null.
   */
  static void copyArrayElements(
      int width,
      Object base,
      long nulls,
      long values,
      int n,
      long childValidity,
      long childData,
      long from) {
    boolean anyNull = false;
    int words = (n + 63) >>> 6;
    for (int w = 0; w < words; w++) {
      if (Platform.getLong(base, nulls + 8L * w) != 0) {
        anyNull = true;
        break;
      }
    }
    if (!anyNull && width > 0) {
      Platform.copyMemory(base, values, null, childData + from * width, (long) n * width);
      ArrowBitmaps.setValid(childValidity, from, n);
      return;
    }
    for (int i = 0; i < n; i++) {
      long at = from + i;
      if (BitSetMethods.isSet(base, nulls, i)) {
        if (width > 0) {
          // Zero, as Spark's ArrowWriter leaves it (the element buffer may not be zeroed).
          Platform.setMemory(childData + at * width, (byte) 0, width);
        }
        continue;
      }
      ArrowBitmaps.setBit(childValidity, at);
      copyValue(width, base, values + (long) Math.max(width, 1) * i, childData, at);
    }
  }

  private abstract static class Column {
    final int ordinal;
    final FieldVector vector;

    Column(int ordinal, FieldVector vector) {
      this.ordinal = ordinal;
      this.vector = vector;
    }

    /** Re-reads buffer addresses after an allocation. */
    abstract void reload();

    abstract void writeNull(InternalRow row, int index);

    /** {@code slot}: the address of the row's 8-byte field slot in {@code base}. */
    abstract void writeUnsafe(InternalRow row, Object base, long rowOffset, long slot, int index);

    abstract void write(InternalRow row, int index);

    /** Grows so that row {@code index} fits. */
    void growRows(int index) {
      while (vector.getValueCapacity() <= index) {
        vector.reAlloc();
      }
      reload();
    }

    void finish(int rows) {
      vector.setValueCount(rows);
    }
  }

  /** A fixed-width (or bit) column: validity bit and value, as Arrow's {@code setSafe}. */
  private static final class FixedColumn extends Column {
    private final int width;
    private final boolean floating;
    private long validity;
    private long data;

    FixedColumn(int ordinal, FieldVector vector, FixedWidthType type) {
      super(ordinal, vector);
      this.width = type.width();
      this.floating = type.floating();
    }

    @Override
    void reload() {
      BaseFixedWidthVector v = (BaseFixedWidthVector) vector;
      validity = v.getValidityBufferAddress();
      data = v.getDataBufferAddress();
    }

    @Override
    void writeNull(InternalRow row, int index) {
      // Arrow's setNull: the validity bit stays clear, the zeroed value stays.
    }

    @Override
    void writeUnsafe(InternalRow row, Object base, long rowOffset, long slot, int index) {
      ArrowBitmaps.setBit(validity, index);
      copyValue(width, base, slot, data, index);
    }

    @Override
    void write(InternalRow row, int index) {
      ArrowBitmaps.setBit(validity, index);
      putValue(width, floating, row, ordinal, data, index);
    }
  }

  /**
   * An array of fixed-width elements: Arrow list validity and int32 offsets, then the elements in
   * the child vector. Offsets of null rows repeat the previous offset, as Arrow fills them.
   */
  private final class ListColumn extends Column {
    private final ListVector list;
    private final BaseFixedWidthVector child;
    private final int width;
    private final boolean floating;
    private boolean childSized;
    private long validity;
    private long offsets;
    private long childValidity;
    private long childData;
    private int childCapacity;
    private int elements;

    ListColumn(int ordinal, ListVector list, FixedWidthType elementType) {
      super(ordinal, list);
      this.list = list;
      this.child = (BaseFixedWidthVector) list.getDataVector();
      this.width = elementType.width();
      this.floating = elementType.floating();
    }

    @Override
    void reload() {
      validity = list.getValidityBufferAddress();
      offsets = list.getOffsetBufferAddress();
      childValidity = child.getValidityBufferAddress();
      childData = child.getDataBufferAddress();
      childCapacity = child.getValueCapacity();
    }

    @Override
    void writeNull(InternalRow row, int index) {
      MemoryUtil.putInt(offsets + 4L * (index + 1), elements);
    }

    @Override
    void writeUnsafe(InternalRow row, Object base, long rowOffset, long slot, int index) {
      long offsetAndSize = Platform.getLong(base, slot);
      long array = rowOffset + (int) (offsetAndSize >> 32);
      int n = (int) Platform.getLong(base, array);
      if (n > 0) {
        reserve(n);
        long header = UnsafeArrayData.calculateHeaderPortionInBytes(n);
        copyElements(base, array + 8, array + header, n);
      }
      endRow(index, n);
    }

    @Override
    void write(InternalRow row, int index) {
      ArrayData a = row.getArray(ordinal);
      int n = a.numElements();
      if (n > 0) {
        reserve(n);
        if (a instanceof UnsafeArrayData) {
          UnsafeArrayData u = (UnsafeArrayData) a;
          long header = UnsafeArrayData.calculateHeaderPortionInBytes(n);
          copyElements(u.getBaseObject(), u.getBaseOffset() + 8, u.getBaseOffset() + header, n);
        } else {
          for (int i = 0; i < n; i++) {
            if (!a.isNullAt(i)) {
              writeElement(a, i, elements + i);
            }
          }
        }
      }
      endRow(index, n);
    }

    private void endRow(int index, int n) {
      ArrowBitmaps.setBit(validity, index);
      elements += n;
      MemoryUtil.putInt(offsets + 4L * (index + 1), elements);
    }

    /**
     * Copies an UnsafeArrayData's elements: null bitset at {@code nulls}, values at {@code values}.
     */
    private void copyElements(Object base, long nulls, long values, int n) {
      copyArrayElements(width, base, nulls, values, n, childValidity, childData, elements);
    }

    private void writeElement(ArrayData a, int i, long at) {
      ArrowBitmaps.setBit(childValidity, at);
      putValue(width, floating, a, i, childData, at);
    }

    /** Room for {@code n} more elements. The first array sizes the child for all rows. */
    private void reserve(int n) {
      long needed = (long) elements + n;
      if (needed <= childCapacity) {
        return;
      }
      if (needed > Integer.MAX_VALUE) {
        throw new IllegalArgumentException(
            "column " + ordinal + " exceeds 2^31-1 array elements, the limit of one Arrow list");
      }
      if (!childSized && elements == 0) {
        // Still empty: allocate for every expected row at this length, instead of growing.
        childSized = true;
        child.clear();
        child.setInitialCapacity((int) Math.min(Integer.MAX_VALUE - 8L, rowsToSizeFor() * n));
        child.allocateNew();
      }
      while (child.getValueCapacity() < needed) {
        child.reAlloc();
      }
      reload();
    }

    @Override
    void growRows(int index) {
      // ListVector.reAlloc grows the elements as well; harmless, reserve() keeps them in step.
      while (list.getValueCapacity() <= index) {
        list.reAlloc();
      }
      reload();
    }

    @Override
    void finish(int rows) {
      child.setValueCount(elements);
      list.setLastSet(rows - 1);
      list.setValueCount(rows);
    }
  }

  /**
   * A string or binary column: Arrow validity, int32 offsets and the bytes. Offsets of null rows
   * repeat the previous offset, as Arrow fills them.
   */
  private final class BytesColumn extends Column {
    private final BaseVariableWidthVector bytes;
    private final boolean utf8;
    private boolean dataSized;
    private long validity;
    private long offsets;
    private long data;
    private long dataCapacity;
    private long end; // bytes written

    BytesColumn(int ordinal, BaseVariableWidthVector bytes, boolean utf8) {
      super(ordinal, bytes);
      this.bytes = bytes;
      this.utf8 = utf8;
    }

    @Override
    void reload() {
      validity = bytes.getValidityBufferAddress();
      offsets = bytes.getOffsetBufferAddress();
      data = bytes.getDataBufferAddress();
      dataCapacity = bytes.getDataBuffer().capacity();
    }

    @Override
    void writeNull(InternalRow row, int index) {
      MemoryUtil.putInt(offsets + 4L * (index + 1), (int) end);
    }

    @Override
    void writeUnsafe(InternalRow row, Object base, long rowOffset, long slot, int index) {
      long offsetAndSize = Platform.getLong(base, slot);
      copy(base, rowOffset + (offsetAndSize >>> 32), (int) offsetAndSize, index);
    }

    @Override
    void write(InternalRow row, int index) {
      if (utf8) {
        UTF8String s = row.getUTF8String(ordinal);
        copy(s.getBaseObject(), s.getBaseOffset(), s.numBytes(), index);
      } else {
        byte[] b = row.getBinary(ordinal);
        copy(b, Platform.BYTE_ARRAY_OFFSET, b.length, index);
      }
    }

    private void copy(Object base, long from, int size, int index) {
      reserve(size);
      Platform.copyMemory(base, from, null, data + end, size);
      end += size;
      ArrowBitmaps.setBit(validity, index);
      MemoryUtil.putInt(offsets + 4L * (index + 1), (int) end);
    }

    /** Room for {@code size} more bytes. The first value sizes the data for all rows. */
    private void reserve(int size) {
      long needed = end + size;
      if (needed <= dataCapacity) {
        return;
      }
      if (needed > Integer.MAX_VALUE) {
        throw new IllegalArgumentException(
            "column "
                + bytes.getName()
                + " holds more than 2^31-1 bytes in one partition, the limit of one Arrow"
                + " string or binary column");
      }
      if (!dataSized && end == 0) {
        // Still empty: allocate for every expected row at this length, instead of growing.
        dataSized = true;
        bytes.reallocDataBuffer(
            Math.min(Integer.MAX_VALUE, Math.max(needed, rowsToSizeFor() * size)));
      }
      while (bytes.getDataBuffer().capacity() < needed) {
        bytes.reallocDataBuffer();
      }
      reload();
    }

    @Override
    void growRows(int index) {
      while (bytes.getValueCapacity() <= index) {
        bytes.reallocValidityAndOffsetBuffers();
      }
      reload();
    }

    @Override
    void finish(int rows) {
      bytes.setLastSet(rows - 1);
      bytes.setValueCount(rows);
    }
  }

  /** Any other column, through Spark's own field writer. */
  private static final class FieldWriterColumn extends Column {
    private final ArrowFieldWriter writer;

    FieldWriterColumn(int ordinal, FieldVector vector) {
      super(ordinal, vector);
      this.writer = ArrowWriter$.MODULE$.createFieldWriter(vector);
    }

    @Override
    void reload() {}

    @Override
    void writeNull(InternalRow row, int index) {
      writer.write(row, ordinal);
    }

    @Override
    void writeUnsafe(InternalRow row, Object base, long rowOffset, long slot, int index) {
      writer.write(row, ordinal);
    }

    @Override
    void write(InternalRow row, int index) {
      writer.write(row, ordinal);
    }

    @Override
    void growRows(int index) {
      // Spark's field writers grow their vectors themselves.
    }

    @Override
    void finish(int rows) {
      writer.finish();
    }
  }
}
