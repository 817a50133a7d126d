package io.npugather.spark.arrow.write;

import io.npugather.spark.arrow.ArrowBitmaps;
import io.npugather.spark.arrow.FixedWidthType;
import org.apache.arrow.memory.util.MemoryUtil;
import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.complex.ListVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;

/**
 * Column-wise copy of Spark column vectors of arrays of fixed-width elements ({@link
 * FixedWidthType}: feature vectors) into an Arrow list: per row an offset and a validity bit, and
 * the elements of a Spark writable vector (the Parquet and ORC readers', on or off heap) in bulk —
 * one {@link PrimitiveColumns} copy of the element range when the batch's arrays lie back to back,
 * else one per array. Other vectors are read through {@link ColumnarArray}, element by element. The
 * element vector grows as needed. Produces the same buffers as Spark's field writers.
 */
final class ArrayColumns {
  private ArrayColumns() {}

  /** The element type if {@code target} is a list of fixed-width elements, else null. */
  static FixedWidthType elementType(FieldVector target) {
    return target instanceof ListVector list ? FixedWidthType.of(list.getDataVector()) : null;
  }

  /**
   * Writes {@code cv}'s rows [0, n) into {@code list} at [base, base + n), after the elements of
   * the rows before. The caller sets the value counts when it is done ({@link #finish}).
   */
  static void copy(FixedWidthType type, ListVector list, ColumnVector cv, int base, int n) {
    while (list.getValueCapacity() < base + n) {
      list.reAlloc();
    }
    BaseFixedWidthVector child = (BaseFixedWidthVector) list.getDataVector();
    long offsets = list.getOffsetBufferAddress();
    long validity = list.getValidityBufferAddress();
    int elements = MemoryUtil.getInt(offsets + 4L * base);
    boolean hasNull = cv.hasNull();
    if (cv instanceof WritableColumnVector w) {
      WritableColumnVector data = w.arrayData();
      int first = -1; // element range of the batch's arrays, if back to back
      long next = -1;
      boolean contiguous = true;
      for (int i = 0; i < n; i++) {
        if (hasNull && cv.isNullAt(i)) {
          continue;
        }
        int at = w.getArrayOffset(i);
        if (first < 0) {
          first = at;
        } else if (at != next) {
          contiguous = false;
          break;
        }
        next = (long) at + w.getArrayLength(i);
      }
      long total = first < 0 ? 0 : next - first;
      if (contiguous && total > 0) {
        reserve(child, (long) elements + total);
        PrimitiveColumns.copy(type, child, data, first, elements, (int) total);
      }
      for (int i = 0; i < n; i++) {
        if (!(hasNull && cv.isNullAt(i))) {
          int m = w.getArrayLength(i);
          if (!contiguous && m > 0) {
            reserve(child, (long) elements + m);
            PrimitiveColumns.copy(type, child, data, w.getArrayOffset(i), elements, m);
          }
          ArrowBitmaps.setBit(validity, (long) base + i);
          elements += m;
        }
        MemoryUtil.putInt(offsets + 4L * (base + i + 1), elements);
      }
      return;
    }
    for (int i = 0; i < n; i++) {
      if (!(hasNull && cv.isNullAt(i))) {
        ColumnarArray array = cv.getArray(i);
        int m = array.numElements();
        reserve(child, (long) elements + m);
        for (int j = 0; j < m; j++) {
          putElement(type, child, array, j, elements + j);
        }
        ArrowBitmaps.setBit(validity, (long) base + i);
        elements += m;
      }
      MemoryUtil.putInt(offsets + 4L * (base + i + 1), elements);
    }
  }

  /** Sets the value counts of {@code list}, whose first {@code rows} rows are written. */
  static void finish(ListVector list, int rows) {
    int elements = rows == 0 ? 0 : MemoryUtil.getInt(list.getOffsetBufferAddress() + 4L * rows);
    list.getDataVector().setValueCount(elements);
    list.setLastSet(rows - 1);
    list.setValueCount(rows);
  }

  private static void reserve(BaseFixedWidthVector child, long elements) {
    if (elements > Integer.MAX_VALUE) {
      throw new IllegalArgumentException(
          "column "
              + child.getName()
              + " has more than 2^31-1 array elements in one partition, the limit of one Arrow"
              + " list");
    }
    while (child.getValueCapacity() < elements) {
      child.reAlloc();
    }
  }

  /** Element {@code j} of {@code array} into {@code child} at {@code index}, or a null there. */
  private static void putElement(
      FixedWidthType type, BaseFixedWidthVector child, ColumnarArray array, int j, int index) {
    if (array.isNullAt(j)) {
      return; // a fresh or grown vector's bits are clear: null, its value zero
    }
    long data = child.getDataBufferAddress();
    switch (type) {
      case BOOLEAN:
        if (array.getBoolean(j)) {
          ArrowBitmaps.setBit(data, index);
        }
        break;
      case BYTE:
        MemoryUtil.putByte(data + index, array.getByte(j));
        break;
      case SHORT:
        MemoryUtil.putShort(data + 2L * index, array.getShort(j));
        break;
      case INT:
      case DATE:
        MemoryUtil.putInt(data + 4L * index, array.getInt(j));
        break;
      case LONG:
      case TIMESTAMP:
      case TIMESTAMP_NTZ:
        MemoryUtil.putLong(data + 8L * index, array.getLong(j));
        break;
      case FLOAT:
        MemoryUtil.putInt(data + 4L * index, Float.floatToRawIntBits(array.getFloat(j)));
        break;
      case DOUBLE:
        MemoryUtil.putLong(data + 8L * index, Double.doubleToRawLongBits(array.getDouble(j)));
        break;
      default:
        throw new IllegalArgumentException("unsupported fixed-width type " + type);
    }
    ArrowBitmaps.setBit(child.getValidityBufferAddress(), index);
  }
}
