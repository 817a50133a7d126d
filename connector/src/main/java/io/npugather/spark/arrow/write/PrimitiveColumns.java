package io.npugather.spark.arrow.write;

import io.npugather.spark.arrow.ArrowBitmaps;
import io.npugather.spark.arrow.FixedWidthType;
import org.apache.arrow.memory.util.MemoryUtil;
import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.spark.sql.execution.vectorized.OffHeapColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;

/**
 * Column-wise copy of Spark column vectors of fixed-width primitive types (boolean, byte, short,
 * int, long, float, double, date, timestamp, timestamp_ntz) into Arrow vectors: a tight typed loop
 * writing the Arrow buffers directly, or one memory copy for an off-heap vector without nulls or
 * dictionary. Produces the same buffers as Spark's field writers.
 */
final class PrimitiveColumns {
  private PrimitiveColumns() {}

  /**
   * Writes {@code cv}'s rows [0, n) into {@code target} at [base, base + n). The caller keeps the
   * value count (the field writer's count).
   */
  static void copy(FixedWidthType type, FieldVector target, ColumnVector cv, int base, int n) {
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
        if (!(hasNull && cv.isNullAt(i)) && cv.getBoolean(i)) {
          ArrowBitmaps.setBit(v.getDataBufferAddress(), (long) base + i);
        }
      }
    } else if (!hasNull
        && cv instanceof OffHeapColumnVector
        && !((OffHeapColumnVector) cv).hasDictionary()) {
      MemoryUtil.copyMemory(
          ((OffHeapColumnVector) cv).valuesNativeAddress(), data, (long) n * width);
    } else {
      switch (type) {
        case BYTE:
          for (int i = 0; i < n; i++) {
            if (hasNull && cv.isNullAt(i)) {
              continue;
            }
            MemoryUtil.putByte(data + i, cv.getByte(i));
          }
          break;
        case SHORT:
          for (int i = 0; i < n; i++) {
            if (hasNull && cv.isNullAt(i)) {
              continue;
            }
            MemoryUtil.putShort(data + 2L * i, cv.getShort(i));
          }
          break;
        case INT:
        case DATE:
          for (int i = 0; i < n; i++) {
            if (hasNull && cv.isNullAt(i)) {
              continue;
            }
            MemoryUtil.putInt(data + 4L * i, cv.getInt(i));
          }
          break;
        case LONG:
        case TIMESTAMP:
        case TIMESTAMP_NTZ:
          for (int i = 0; i < n; i++) {
            if (hasNull && cv.isNullAt(i)) {
              continue;
            }
            MemoryUtil.putLong(data + 8L * i, cv.getLong(i));
          }
          break;
        case FLOAT:
          for (int i = 0; i < n; i++) {
            if (hasNull && cv.isNullAt(i)) {
              continue;
            }
            MemoryUtil.putInt(data + 4L * i, Float.floatToRawIntBits(cv.getFloat(i)));
          }
          break;
        case DOUBLE:
          for (int i = 0; i < n; i++) {
            if (hasNull && cv.isNullAt(i)) {
              continue;
            }
            MemoryUtil.putLong(data + 8L * i, Double.doubleToRawLongBits(cv.getDouble(i)));
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
        MemoryUtil.putByte(addr, (byte) (cv.isNullAt(i) ? (b & ~mask) : (b | mask)));
      }
    } else {
      ArrowBitmaps.setValid(validity, base, n);
    }
  }
}
