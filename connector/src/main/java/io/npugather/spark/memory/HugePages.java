package io.npugather.spark.memory;

import io.npugather.NativeMemory;

/**
 * Transparent huge pages for large off-heap buffers about to be written for the first time ({@link
 * NativeMemory#adviseHugePages}): from {@link #ADVICE_MIN_BYTES} on such a buffer is faulted in 2
 * MiB at a time instead of 4 KiB. A hint; smaller buffers are left alone.
 */
public final class HugePages {
  /** Smallest buffer {@link #advise} advises (NPG_HUGE_PAGE_ADVICE_MIN_BYTES). */
  public static final long ADVICE_MIN_BYTES = 4L << 20;

  private HugePages() {}

  /**
   * Advises {@code bytes} at {@code address} for huge pages.
   *
   * @throws IllegalArgumentException if {@code bytes} is negative, or {@code address} is 0 and
   *     {@code bytes} is not
   */
  public static void advise(long address, long bytes) {
    NativeMemory.adviseHugePages(address, bytes);
  }
}
