package io.npugather.spark.arrow.write;

import io.npugather.spark.arrow.ArrowBitmaps;
import io.npugather.spark.arrow.FixedWidthType;
import io.npugather.spark.memory.HugePages;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.util.MemoryUtil;
import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.complex.ListVector;
import org.apache.arrow.vector.ipc.message.ArrowFieldNode;
import org.apache.spark.sql.catalyst.expressions.UnsafeArrayData;
import org.apache.spark.sql.columnar.CachedBatch;
import org.apache.spark.sql.execution.columnar.ColumnAccessor$;
import org.apache.spark.sql.execution.columnar.DefaultCachedBatch;
import org.apache.spark.sql.execution.columnar.compression.PassThrough$;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.Platform;

/**
 * Writes the batches of a DataFrame cached with Spark's default cache format ({@link
 * DefaultCachedBatch}: per column a null list and a possibly compressed value buffer) into Arrow
 * vectors, without Spark's detour through a fresh on-heap column vector per batch:
 *
 * <ul>
 *   <li>the row count is summed over the partition's batches first (they are in memory), so every
 *       vector is allocated once at its final size;
 *   <li>a column stored uncompressed and without nulls (Spark's {@code PassThrough}, always the
 *       case for float and double columns without nulls) is one memory copy from the cached bytes
 *       into the Arrow buffer;
 *   <li>any other primitive column is decoded by Spark's own {@code ColumnAccessor} into one reused
 *       on-heap vector, then copied ({@link PrimitiveColumns});
 *   <li>an array column of fixed-width elements ({@link FixedWidthType}: feature vectors) is read
 *       from its cached bytes straight into the Arrow list: Spark stores it never compressed, as
 *       [null count][null row positions, int each][per non-null row: int length, then the array as
 *       {@link UnsafeArrayData}], and each array's elements are one memory copy when none is null
 *       ({@link FixedWidthRowWriter#copyArrayElements}). The element vector is sized up front for
 *       every row holding as many elements as the first array (feature vectors: exactly), at most
 *       as many as the cached bytes can hold, and grows if the arrays turn out longer: no pass over
 *       the arrays only to count their elements.
 * </ul>
 *
 * Only for the primitive types Spark itself reads from its cache as columnar batches: boolean,
 * byte, short, int, long, float, double; and arrays of fixed-width elements ({@link #supports}).
 * Produces the same buffers as Spark's field writers.
 */
final class CachedBatchColumns {
  private CachedBatchColumns() {}

  private static final int PASS_THROUGH = PassThrough$.MODULE$.typeId();

  /**
   * True if every column of {@code schema} is of a primitive type Spark decodes from its cache or
   * an array of fixed-width elements.
   */
  static boolean supports(StructType schema) {
    for (StructField f : schema.fields()) {
      FixedWidthType t = FixedWidthType.of(f.dataType());
      if (!(FixedWidthType.ofElements(f.dataType()) != null
          || (t != null && t.cachedAsColumns()))) {
        return false;
      }
    }
    return true;
  }

  /**
   * Writes {@code batches} into {@code root}'s vectors (freshly created, not allocated).
   *
   * @param columns for each field of {@code schema}, the index of its buffer in a cached batch
   * @return the number of rows written
   */
  static int write(
      Iterator<CachedBatch> batches, int[] columns, StructType schema, VectorSchemaRoot root) {
    List<DefaultCachedBatch> all = new ArrayList<>();
    long total = 0;
    int largest = 0;
    while (batches.hasNext()) {
      CachedBatch b = batches.next();
      if (!(b instanceof DefaultCachedBatch)) {
        throw new IllegalArgumentException(
            "cached batch of class " + b.getClass().getName() + "; expected DefaultCachedBatch");
      }
      DefaultCachedBatch d = (DefaultCachedBatch) b;
      all.add(d);
      total += d.numRows();
      largest = Math.max(largest, d.numRows());
    }
    if (total > Integer.MAX_VALUE) {
      throw new IllegalArgumentException(
          "partition exceeds 2^31-1 rows, the limit of one Arrow batch");
    }
    int rows = (int) total;
    List<FieldVector> targets = root.getFieldVectors();
    int numFields = targets.size();
    FixedWidthType[] types = new FixedWidthType[numFields];
    int[] widths = new int[numFields]; // element width of an array column, else 0
    int[] elements = new int[numFields]; // elements written so far to an array column
    for (int c = 0; c < numFields; c++) {
      FieldVector v = targets.get(c);
      DataType t = schema.fields()[c].dataType();
      FixedWidthType elementType = FixedWidthType.ofElements(t);
      if (elementType != null) {
        widths[c] = elementType.width();
        allocateList((ListVector) v, rows, expectedElements(all, columns[c], widths[c], rows));
      } else {
        v.setInitialCapacity(Math.max(rows, 1));
        v.allocateNew();
        types[c] = FixedWidthType.of(v);
      }
    }
    OnHeapColumnVector[] scratch = new OnHeapColumnVector[numFields];
    try {
      int base = 0;
      for (DefaultCachedBatch batch : all) {
        int n = batch.numRows();
        if (n == 0) {
          continue;
        }
        byte[][] buffers = batch.buffers();
        for (int c = 0; c < numFields; c++) {
          byte[] cached = buffers[columns[c]];
          if (widths[c] != 0) {
            elements[c] =
                copyArrays(cached, (ListVector) targets.get(c), widths[c], base, n, elements[c], c);
            continue;
          }
          BaseFixedWidthVector target = (BaseFixedWidthVector) targets.get(c);
          if (!copyPassThrough(cached, target, base, n)) {
            if (scratch[c] == null) {
              scratch[c] = new OnHeapColumnVector(largest, schema.fields()[c].dataType());
            }
            OnHeapColumnVector cv = scratch[c];
            cv.reset();
            ColumnAccessor$.MODULE$.decompress(cached, cv, schema.fields()[c].dataType(), n);
            PrimitiveColumns.copy(types[c], target, cv, base, n);
          }
        }
        base += n;
      }
    } finally {
      for (OnHeapColumnVector v : scratch) {
        if (v != null) {
          v.close();
        }
      }
    }
    for (int c = 0; c < numFields; c++) {
      FieldVector v = targets.get(c);
      if (widths[c] != 0) {
        ListVector list = (ListVector) v;
        list.getDataVector().setValueCount(elements[c]);
        list.setLastSet(rows - 1);
      }
      v.setValueCount(rows);
    }
    root.setRowCount(rows);
    return rows;
  }

  /** Allocates {@code list} once for {@code rows} rows holding {@code elements} elements in all. */
  private static void allocateList(ListVector list, int rows, long elements) {
    if (elements > Integer.MAX_VALUE) {
      throw new IllegalArgumentException(
          "column "
              + list.getName()
              + " has "
              + elements
              + " array elements in one partition; the limit of one Arrow list is 2^31-1");
    }
    list.setInitialCapacity(Math.max(rows, 1), 0.0);
    list.allocateNew();
    FieldVector child = list.getDataVector();
    child.clear();
    int n = Math.max((int) elements, 1);
    int width =
        child instanceof BaseFixedWidthVector ? ((BaseFixedWidthVector) child).getTypeWidth() : 0;
    long valueBytes = (long) n * width;
    if (width == 0 || valueBytes < HugePages.ADVICE_MIN_BYTES) {
      child.setInitialCapacity(n);
      child.allocateNew();
      return;
    }
    // The element values (feature vectors: most of the partition) are written exactly once, by
    // copyArrays: allocateNew would zero them first, an extra pass over fresh memory. (A task's
    // allocator serves such a buffer from mapped memory or advises it for huge pages:
    // GatherMemory.)
    BufferAllocator allocator = child.getAllocator();
    try (ArrowBuf values = allocator.buffer(valueBytes)) {
      // Every element is null until written: Arrow gives the vector a zeroed validity bitmap.
      child.loadFieldBuffers(new ArrowFieldNode(n, n), List.of(allocator.getEmpty(), values));
    }
  }

  /**
   * The elements to allocate for an array column (buffer {@code buffer}, elements of {@code width})
   * of {@code rows} rows: every row as long as the first array, but no more than the cached bytes
   * can hold (each element takes at least its width there). Reads one array header.
   */
  private static long expectedElements(
      List<DefaultCachedBatch> batches, int buffer, int width, int rows) {
    long bytes = 0;
    long first = -1;
    for (DefaultCachedBatch batch : batches) {
      if (batch.numRows() == 0) {
        continue;
      }
      byte[] cached = batch.buffers()[buffer];
      bytes += cached.length;
      if (first < 0 && cached.length >= 4) {
        int nulls = Platform.getInt(cached, Platform.BYTE_ARRAY_OFFSET);
        long at = 4 + 4L * nulls;
        if (nulls >= 0 && nulls < batch.numRows() && at + 12 <= cached.length) {
          first = Math.max(0, Platform.getLong(cached, Platform.BYTE_ARRAY_OFFSET + at + 4));
        }
      }
    }
    long bound = bytes / Math.max(width, 1);
    return Math.min(Integer.MAX_VALUE, Math.min(bound, Math.max(first, 0) * rows));
  }

  /** The null count in the header of a cached column, checked against its rows. */
  private static int nullCount(byte[] cached, int rows, int field) {
    int nulls = cached.length < 4 ? -1 : Platform.getInt(cached, Platform.BYTE_ARRAY_OFFSET);
    if (nulls < 0 || nulls > rows || 4 + 4L * nulls > cached.length) {
      throw new IllegalArgumentException(
          "cached column "
              + field
              + " of "
              + cached.length
              + " bytes declares "
              + nulls
              + " nulls for "
              + rows
              + " rows; allowed: 0 to "
              + rows);
    }
    return nulls;
  }

  /**
   * Writes a cached array column's {@code n} rows into rows [base, base + n) of {@code list}, whose
   * elements hold {@code elements} values so far: validity, offsets and elements. The element
   * vector grows when an array does not fit. Every array's bytes are checked against the column's
   * before they are read.
   *
   * @param field the column's index, for errors
   * @return the elements written so far, these rows' included
   * @throws IllegalArgumentException if the bytes are not Spark's uncompressed array column layout
   */
  private static int copyArrays(
      byte[] cached, ListVector list, int width, int base, int n, int elements, int field) {
    long offset = Platform.BYTE_ARRAY_OFFSET;
    long end = offset + cached.length;
    long validity = list.getValidityBufferAddress();
    long offsets = list.getOffsetBufferAddress();
    BaseFixedWidthVector child = (BaseFixedWidthVector) list.getDataVector();
    long childValidity = child.getValidityBufferAddress();
    long childData = child.getDataBufferAddress();
    int nulls = nullCount(cached, n, field);
    int k = 0;
    int nextNull = nulls > 0 ? Platform.getInt(cached, offset + 4) : -1;
    long at = offset + 4 + 4L * nulls;
    for (int r = 0; r < n; r++) {
      if (r == nextNull) {
        k++;
        nextNull = k < nulls ? Platform.getInt(cached, offset + 4 + 4L * k) : -1;
      } else {
        long array = at + 4;
        int size = at + 12 <= end ? Platform.getInt(cached, at) : -1;
        long m = size >= 8 ? Platform.getLong(cached, array) : -1;
        if (m < 0
            || array + size > end
            || UnsafeArrayData.calculateHeaderPortionInBytes(m) + m * Math.max(width, 1) > size) {
          throw notTheArrayLayout(cached, field, n, r - k, nulls, at - offset);
        }
        if (elements + m > Integer.MAX_VALUE) {
          throw new IllegalArgumentException(
              "column "
                  + list.getName()
                  + " has more than 2^31-1 array elements in one partition, the limit of one Arrow"
                  + " list");
        }
        if (m > 0) {
          if (elements + m > child.getValueCapacity()) {
            while (elements + m > child.getValueCapacity()) {
              child.reAlloc();
            }
            childValidity = child.getValidityBufferAddress();
            childData = child.getDataBufferAddress();
          }
          long header = UnsafeArrayData.calculateHeaderPortionInBytes(m);
          FixedWidthRowWriter.copyArrayElements(
              width,
              cached,
              array + 8,
              array + header,
              (int) m,
              childValidity,
              childData,
              elements);
        }
        ArrowBitmaps.setBit(validity, base + r);
        elements += (int) m;
        at = array + size;
      }
      MemoryUtil.putInt(offsets + 4L * (base + r + 1), elements);
    }
    if (at != end) {
      throw notTheArrayLayout(cached, field, n, n - nulls, nulls, at - offset);
    }
    return elements;
  }

  private static IllegalArgumentException notTheArrayLayout(
      byte[] cached, int field, int rows, int arraysRead, int nulls, long at) {
    return new IllegalArgumentException(
        "cached array column "
            + field
            + " has "
            + cached.length
            + " bytes for "
            + rows
            + " rows, "
            + arraysRead
            + " of its "
            + (rows - nulls)
            + " arrays read end at byte "
            + at
            + "; expected Spark's uncompressed array column layout");
  }

  /**
   * Copies a column stored as [null count 0][PassThrough id][n values] into rows [base, base + n)
   * of {@code target}; false (nothing written) for any other encoding.
   */
  private static boolean copyPassThrough(
      byte[] cached, BaseFixedWidthVector target, int base, int n) {
    int width = target.getTypeWidth();
    if (width == 0
        || cached.length != 8 + (long) n * width
        || ByteOrder.nativeOrder() != ByteOrder.LITTLE_ENDIAN) {
      return false; // bits, not the uncompressed layout, or not Arrow's byte order
    }
    ByteBuffer header = ByteBuffer.wrap(cached, 0, 8).order(ByteOrder.nativeOrder());
    if (header.getInt(0) != 0 || header.getInt(4) != PASS_THROUGH) {
      return false;
    }
    Platform.copyMemory(
        cached,
        Platform.BYTE_ARRAY_OFFSET + 8,
        null,
        target.getDataBufferAddress() + (long) base * width,
        (long) n * width);
    ArrowBitmaps.setValid(target.getValidityBufferAddress(), base, n);
    return true;
  }
}
