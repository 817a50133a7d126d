package io.npugather.spark.arrow.write;

import io.npugather.spark.arrow.ArrowBitmaps;
import io.npugather.spark.arrow.FixedWidthType;
import org.apache.arrow.memory.util.MemoryUtil;
import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.spark.sql.execution.vectorized.OffHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.unsafe.Platform;

/**
 * Column-wise copy of Spark column vectors of fixed-width primitive types (boolean, byte, short,
 * int, long, float, double, date, timestamp, timestamp_ntz) into Arrow vectors: one memory copy for
 * an off-heap vector without nulls or dictionary, one bulk read and one memory copy for such an
 * on-heap vector, else a tight typed loop writing the Arrow buffers directly. Produces the same
 * buffers as Spark's field writers.
 */
final class PrimitiveColumns {
  private PrimitiveColumns() {}

  /**
   * Writes {@code cv}'s rows [0, n) into {@code target} at [base, base + n). The caller keeps the
   * value count (the field writer's count).
   */
  static void copy(FixedWidthType type, FieldVector target, ColumnVector cv, int base, int n) {
    copy(type, target, cv, 0, base, n);
  }

  /**
   * Writes {@code cv}'s rows [from, from + n) into {@code target} at [base, base + n), as {@link
   * #copy(FixedWidthType, FieldVector, ColumnVector, int, int)}; {@code hasNull} is the vector's,
   * so a range of a vector with nulls elsewhere is still checked row by row.
   */
  static void copy(
      FixedWidthType type, FieldVector target, ColumnVector cv, int from, int base, int n) {
    BaseFixedWidthVector v = (BaseFixedWidthVector) target;
    long needed = (long) base + n;
    while (v.getValueCapacity() < needed) {
      v.reAlloc();
    }
    int width = v.getTypeWidth();
    long data = v.getDataBufferAddress() + (long) base * width;
    long validity = v.getValidityBufferAddress();
    boolean hasNull = cv.hasNull();
    if (type == FixedWidthType.BOOLEAN) {
      // Value bits here; validity bits below, as for every kind.
      for (int i = 0; i < n; i++) {
        if (!(hasNull && cv.isNullAt(from + i)) && cv.getBoolean(from + i)) {
          ArrowBitmaps.setBit(v.getDataBufferAddress(), (long) base + i);
        }
      }
    } else if (!hasNull
        && cv instanceof OffHeapColumnVector
        && !((OffHeapColumnVector) cv).hasDictionary()) {
      MemoryUtil.copyMemory(
          ((OffHeapColumnVector) cv).valuesNativeAddress() + (long) from * width,
          data,
          (long) n * width);
    } else if (!hasNull
        && cv instanceof OnHeapColumnVector
        && !((OnHeapColumnVector) cv).hasDictionary()) {
      copyOnHeap(type, (OnHeapColumnVector) cv, from, n, data);
    } else {
      switch (type) {
        case BYTE:
          for (int i = 0; i < n; i++) {
            if (hasNull && cv.isNullAt(from + i)) {
              continue;
            }
            MemoryUtil.putByte(data + i, cv.getByte(from + i));
          }
          break;
        case SHORT:
          for (int i = 0; i < n; i++) {
            if (hasNull && cv.isNullAt(from + i)) {
              continue;
            }
            MemoryUtil.putShort(data + 2L * i, cv.getShort(from + i));
          }
          break;
        case INT:
        case DATE:
          for (int i = 0; i < n; i++) {
            if (hasNull && cv.isNullAt(from + i)) {
              continue;
            }
            MemoryUtil.putInt(data + 4L * i, cv.getInt(from + i));
          }
          break;
        case LONG:
        case TIMESTAMP:
        case TIMESTAMP_NTZ:
          for (int i = 0; i < n; i++) {
            if (hasNull && cv.isNullAt(from + i)) {
              continue;
            }
            MemoryUtil.putLong(data + 8L * i, cv.getLong(from + i));
          }
          break;
        case FLOAT:
          for (int i = 0; i < n; i++) {
            if (hasNull && cv.isNullAt(from + i)) {
              continue;
            }
            MemoryUtil.putInt(data + 4L * i, Float.floatToRawIntBits(cv.getFloat(from + i)));
          }
          break;
        case DOUBLE:
          for (int i = 0; i < n; i++) {
            if (hasNull && cv.isNullAt(from + i)) {
              continue;
            }
            MemoryUtil.putLong(data + 8L * i, Double.doubleToRawLongBits(cv.getDouble(from + i)));
          }
          break;
        default:
          throw new IllegalArgumentException("unsupported fixed-width type " + type);
      }
    }
    // Null slots keep the zeros of a fresh or grown vector; only their validity bit matters.
    if (hasNull) {
      for (int i = 0; i < n; i++) {
        long bit = (long) base + i;
        long addr = validity + (bit >>> 3);
        byte b = MemoryUtil.getByte(addr);
        int mask = 1 << (int) (bit & 7);
        MemoryUtil.putByte(addr, (byte) (cv.isNullAt(from + i) ? (b & ~mask) : (b | mask)));
      }
    } else {
      ArrowBitmaps.setValid(validity, base, n);
    }
  }

  /** One bulk read of an on-heap vector's rows [from, from + n), one copy into {@code data}. */
  private static void copyOnHeap(
      FixedWidthType type, OnHeapColumnVector cv, int from, int n, long data) {
    Object values;
    long offset;
    switch (type) {
      case BYTE:
        values = cv.getBytes(from, n);
        offset = Platform.BYTE_ARRAY_OFFSET;
        break;
      case SHORT:
        values = cv.getShorts(from, n);
        offset = Platform.SHORT_ARRAY_OFFSET;
        break;
      case INT:
      case DATE:
        values = cv.getInts(from, n);
        offset = Platform.INT_ARRAY_OFFSET;
        break;
      case LONG:
      case TIMESTAMP:
      case TIMESTAMP_NTZ:
        values = cv.getLongs(from, n);
        offset = Platform.LONG_ARRAY_OFFSET;
        break;
      case FLOAT:
        values = cv.getFloats(from, n);
        offset = Platform.FLOAT_ARRAY_OFFSET;
        break;
      case DOUBLE:
        values = cv.getDoubles(from, n);
        offset = Platform.DOUBLE_ARRAY_OFFSET;
        break;
      default:
        throw new IllegalArgumentException("unsupported fixed-width type " + type);
    }
    Platform.copyMemory(values, offset, null, data, (long) n * type.width());
  }
}
