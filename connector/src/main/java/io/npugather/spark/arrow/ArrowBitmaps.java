package io.npugather.spark.arrow;

import org.apache.arrow.memory.util.MemoryUtil;

/** Arrow bitmaps (validity, boolean values) at a buffer address, least significant bit first. */
public final class ArrowBitmaps {
  private ArrowBitmaps() {}

  /** Bit {@code index} of the bitmap at {@code bitmap}. */
  public static boolean isSet(long bitmap, long index) {
    return (MemoryUtil.getByte(bitmap + (index >>> 3)) & (1 << (int) (index & 7))) != 0;
  }

  /** Sets bit {@code index} of the bitmap at {@code bitmap}. */
  public static void setBit(long bitmap, long index) {
    long addr = bitmap + (index >>> 3);
    MemoryUtil.putByte(addr, (byte) (MemoryUtil.getByte(addr) | (1 << (int) (index & 7))));
  }

  /** Sets bits [from, from + n) of the bitmap at {@code validity}. */
  public static void setValid(long validity, long from, int n) {
    long bit = from;
    long end = from + n;
    while (bit < end && (bit & 7) != 0) {
      setBit(validity, bit);
      bit++;
    }
    long fullBytes = (end - bit) >>> 3;
    if (fullBytes > 0) {
      MemoryUtil.setMemory(validity + (bit >>> 3), fullBytes, (byte) 0xFF);
      bit += fullBytes << 3;
    }
    while (bit < end) {
      setBit(validity, bit);
      bit++;
    }
  }
}
