package io.npugather.spark.arrow;

import org.apache.arrow.memory.util.MemoryUtil;
import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.BitVector;
import org.apache.arrow.vector.DateDayVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.Float8Vector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.SmallIntVector;
import org.apache.arrow.vector.TimeStampMicroTZVector;
import org.apache.arrow.vector.TimeStampMicroVector;
import org.apache.arrow.vector.TinyIntVector;
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

  private static final int BYTE = 1;
  private static final int SHORT = 2;
  private static final int INT = 3;
  private static final int LONG = 4;
  private static final int FLOAT = 5;
  private static final int DOUBLE = 6;
  private static final int BOOLEAN = 7;

  /** The copy kind for {@code target}, or 0 if it is not a supported fixed-width vector. */
  static int kind(FieldVector target) {
    if (target instanceof TinyIntVector) {
      return BYTE;
    } else if (target instanceof SmallIntVector) {
      return SHORT;
    } else if (target instanceof IntVector || target instanceof DateDayVector) {
      return INT;
    } else if (target instanceof BigIntVector
        || target instanceof TimeStampMicroTZVector
        || target instanceof TimeStampMicroVector) {
      return LONG;
    } else if (target instanceof Float4Vector) {
      return FLOAT;
    } else if (target instanceof Float8Vector) {
      return DOUBLE;
    } else if (target instanceof BitVector) {
      return BOOLEAN;
    }
    return 0;
  }

  /**
   * Writes {@code cv}'s rows [0, n) into {@code target} at [base, base + n). The caller keeps the
   * value count (the field writer's count).
   */
  static void copy(int kind, FieldVector target, ColumnVector cv, int base, int n) {
    BaseFixedWidthVector v = (BaseFixedWidthVector) target;
    long needed = (long) base + n;
    while (v.getValueCapacity() < needed) {
      v.reAlloc();
    }
    int width = v.getTypeWidth();
    long data = v.getDataBufferAddress() + (long) base * width;
    long validity = v.getValidityBufferAddress();
    boolean hasNull = cv.hasNull();
    if (kind == BOOLEAN) {
      // Value bits here; validity bits below, as for every kind.
      for (int i = 0; i < n; i++) {
        if (!(hasNull && cv.isNullAt(i)) && cv.getBoolean(i)) {
          setBit(v.getDataBufferAddress(), (long) base + i);
        }
      }
    } else if (!hasNull
        && cv instanceof OffHeapColumnVector
        && !((OffHeapColumnVector) cv).hasDictionary()) {
      MemoryUtil.copyMemory(((OffHeapColumnVector) cv).valuesNativeAddress(), data, (long) n * width);
    } else {
      switch (kind) {
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
          for (int i = 0; i < n; i++) {
            if (hasNull && cv.isNullAt(i)) {
              continue;
            }
            MemoryUtil.putInt(data + 4L * i, cv.getInt(i));
          }
          break;
        case LONG:
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
          throw new IllegalArgumentException("unsupported copy kind " + kind);
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
      setValid(validity, base, n);
    }
  }

  /** Bit {@code index} of the bitmap at {@code bitmap} (Arrow's order: least significant first). */
  static boolean isSet(long bitmap, long index) {
    return (MemoryUtil.getByte(bitmap + (index >>> 3)) & (1 << (int) (index & 7))) != 0;
  }

  static void setBit(long bitmap, long index) {
    long addr = bitmap + (index >>> 3);
    MemoryUtil.putByte(addr, (byte) (MemoryUtil.getByte(addr) | (1 << (int) (index & 7))));
  }

  /** Sets validity bits [from, from + n). */
  static void setValid(long validity, long from, int n) {
    long bit = from;
    long end = from + n;
    while (bit < end && (bit & 7) != 0) {
      long addr = validity + (bit >>> 3);
      MemoryUtil.putByte(addr, (byte) (MemoryUtil.getByte(addr) | (1 << (int) (bit & 7))));
      bit++;
    }
    long fullBytes = (end - bit) >>> 3;
    if (fullBytes > 0) {
      MemoryUtil.setMemory(validity + (bit >>> 3), fullBytes, (byte) 0xFF);
      bit += fullBytes << 3;
    }
    while (bit < end) {
      long addr = validity + (bit >>> 3);
      MemoryUtil.putByte(addr, (byte) (MemoryUtil.getByte(addr) | (1 << (int) (bit & 7))));
      bit++;
    }
  }
}
