package io.npugather;

import io.npugather.bridge.NativeCore;

/**
 * The one place a native result code becomes an exception: every wrapper of the native library
 * passes what a call returned to {@link #check}.
 */
final class NativeStatus {
  private NativeStatus() {}

  /**
   * Returns when {@code rc} is {@code NPG_SUCCESS}; otherwise throws the failure the native library
   * recorded for this thread: a {@link VendorException} when a vendor code caused it, else an
   * {@link NpuGatherException}, both with the library's text.
   *
   * @param operation the Java operation that made the call, for the exception
   * @param rank the calling rank, or -1 before a rank is known (the vendor's rank wins when known)
   */
  static void check(int rc, String operation, int rank) {
    if (rc != 0) {
      String text = NativeCore.npg_last_error().getString();
      String library = NativeCore.npg_last_vendor_library().getString();
      if (!library.isEmpty()) {
        int vendorRank = NativeCore.npg_last_vendor_rank();
        throw new VendorException(
            ResultCode.fromNative(rc),
            operation,
            vendorRank >= 0 ? vendorRank : rank,
            text,
            library,
            NativeCore.npg_last_vendor_code(),
            NativeCore.npg_last_vendor_code_name().getString(),
            NativeCore.npg_last_vendor_message().getString());
      }
      throw new NpuGatherException(ResultCode.fromNative(rc), operation, rank, text);
    }
  }
}
