package io.npugather.spark.memory;

import io.npugather.NpuGatherException;
import io.npugather.ResultCode;
import io.npugather.bridge.NativeCore;

/**
 * Transparent huge pages for large off-heap buffers about to be written for the first time ({@code
 * npg_advise_huge_pages}): from {@link #ADVICE_MIN_BYTES} on such a buffer is faulted in 2 MiB at a
 * time instead of 4 KiB. A hint; smaller buffers are left alone.
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
    if (bytes < 0 || (address == 0 && bytes != 0)) {
      throw new IllegalArgumentException(
          "adviseHugePages: address "
              + address
              + ", bytes "
              + bytes
              + "; allowed: bytes >= 0 at a non-zero address (0 bytes: any address)");
    }
    if (NativeCore.npg_advise_huge_pages(address, bytes) != 0) {
      // The native side refuses only the arguments checked above: any failure is its own.
      throw new NpuGatherException(
          ResultCode.INTERNAL_ERROR,
          "adviseHugePages",
          -1,
          NativeCore.npg_last_error().getString());
    }
  }
}
