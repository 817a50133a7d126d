package io.npugather;

import io.npugather.bridge.NativeCore;

/**
 * The native library's calls on off-heap memory the caller owns (an {@code ArrowBuf}'s address,
 * say): advice for transparent huge pages and faulting pages in ahead of the first write. Neither
 * changes a byte of the memory.
 */
public final class NativeMemory {
  static {
    NativeLibrary.load();
  }

  private NativeMemory() {}

  /**
   * Advises {@code bytes} at {@code address} for transparent huge pages ({@code
   * npg_advise_huge_pages}): a hint, which the native library gives only to buffers of at least
   * {@code NPG_HUGE_PAGE_ADVICE_MIN_BYTES}.
   *
   * @throws IllegalArgumentException if {@code bytes} is negative, or {@code address} is 0 and
   *     {@code bytes} is not
   */
  public static void adviseHugePages(long address, long bytes) {
    requireRange("adviseHugePages", address, bytes);
    NativeStatus.check(NativeCore.npg_advise_huge_pages(address, bytes), "adviseHugePages", -1);
  }

  /**
   * Faults in the pages of {@code bytes} at {@code address} ({@code npg_populate_pages}) without
   * changing a byte, so the memory may be written meanwhile. The memory must stay allocated until
   * the call returns: a touch of freed memory may crash the JVM.
   *
   * @throws IllegalArgumentException if {@code bytes} is negative, or {@code address} is 0 and
   *     {@code bytes} is not
   */
  public static void populatePages(long address, long bytes) {
    requireRange("populatePages", address, bytes);
    NativeStatus.check(NativeCore.npg_populate_pages(address, bytes), "populatePages", -1);
  }

  private static void requireRange(String operation, long address, long bytes) {
    if (bytes < 0 || (address == 0 && bytes != 0)) {
      throw new IllegalArgumentException(
          operation
              + ": address "
              + address
              + ", bytes "
              + bytes
              + "; allowed: bytes >= 0 at a non-zero address (0 bytes: any address)");
    }
  }
}
