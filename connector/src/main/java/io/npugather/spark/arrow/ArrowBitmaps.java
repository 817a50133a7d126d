package io.npugather.spark.arrow;

import org.apache.arrow.memory.util.MemoryUtil;

/** Arrow bitmaps (validity, boolean values) at a buffer address, least significant bit first. */
public final class ArrowBitmaps {
  /**
   * Whole bytes from which a run of set bits is one {@code setMemory} call: a shorter run (an
   * array's elements, once per row) is cheaper written a word at a time than through the call.
   */
  private static final long SET_MEMORY_BYTES = 256;

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
    long at = validity + (bit >>> 3);
    if (fullBytes >= SET_MEMORY_BYTES) {
      MemoryUtil.setMemory(at, fullBytes, (byte) 0xFF);
    } else {
      long stop = at + fullBytes;
      for (; at + 8 <= stop; at += 8) {
        MemoryUtil.putLong(at, -1L);
      }
      for (; at < stop; at++) {
        MemoryUtil.putByte(at, (byte) 0xFF);
      }
    }
    bit += fullBytes << 3;
    while (bit < end) {
      setBit(validity, bit);
      bit++;
    }
  }
}
