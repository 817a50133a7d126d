package io.npugather.bridge;

import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.PointerPointer;
import org.bytedeco.javacpp.SizeTPointer;
import org.bytedeco.javacpp.annotation.Cast;
import org.bytedeco.javacpp.annotation.Platform;

/**
 * The JavaCPP binding of {@code npugather.h}, one Java method per C function.
 *
 * <p>Internal to the project: the operator API in the connector module wraps it and turns result
 * codes into typed exceptions. Buffers cross as raw off-heap addresses (Arrow buffers' {@code
 * memoryAddress()}), never as Java arrays, so no byte of payload is copied by the bridge.
 */
@Platform(value = "linux", include = "npugather.h", compiler = "cpp17")
public final class NativeCore {
  static {
    Loader.load();
  }

  private NativeCore() {}

  /**
   * Loads the native library (once). Call before allocating JavaCPP pointers: the library also
   * carries JavaCPP's own natives, and reading the constants below does not load it.
   */
  public static void load() {
    // Class initialisation above does the work.
  }

  /** {@code NPG_ROOT_INFO_MAX_BYTES}: the largest root info of any backend. */
  public static final int ROOT_INFO_MAX_BYTES = 8192;

  /** {@code NPG_FLAG_FORCE_TCP}. */
  public static final int FLAG_FORCE_TCP = 0x1;

  /** {@code NPG_FLAG_FORCE_STAGING}. */
  public static final int FLAG_FORCE_STAGING = 0x2;

  public static native int npg_get_root_info(
      String backend,
      String bindAddress,
      @Cast("void*") BytePointer rootInfo,
      @Cast("size_t") long capacity,
      SizeTPointer rootInfoSize);

  public static native int npg_release_root_info(
      String backend, @Cast("const void*") BytePointer rootInfo, @Cast("size_t") long rootInfoSize);

  public static native int npg_comm_init(
      String backend,
      int rank,
      int rankSize,
      int rankRoot,
      String commDomain,
      int commMode,
      int deviceId,
      String rankTableFile,
      long timeoutMs,
      @Cast("uint32_t") int flags,
      @Cast("const void*") BytePointer rootInfo,
      @Cast("size_t") long rootInfoSize,
      @Cast("npg_comm_t*") PointerPointer<?> comm);

  public static native int npg_all_gather(
      @Cast("npg_comm_t") Pointer comm,
      @Cast("const void*") long sendAddress,
      @Cast("void*") long recvAddress,
      @Cast("uint64_t") long count,
      @Cast("npg_dtype_t") int dtype);

  public static native int npg_all_gather_v(
      @Cast("npg_comm_t") Pointer comm,
      @Cast("const void*") long sendAddress,
      @Cast("uint64_t") long sendCount,
      @Cast("void*") long recvAddress,
      @Cast("const uint64_t*") long[] recvCounts,
      @Cast("const uint64_t*") long[] recvDispls,
      @Cast("npg_dtype_t") int dtype);

  /**
   * {@code segments} holds (address, bytes) pairs: on the 64-bit platforms this library is built
   * for, that is exactly the layout of an {@code npg_segment_t} array.
   */
  public static native int npg_all_gather_v_segments(
      @Cast("npg_comm_t") Pointer comm,
      @Cast("const npg_segment_t*") long[] segments,
      @Cast("size_t") long segmentCount,
      @Cast("void*") long recvAddress,
      @Cast("const uint64_t*") long[] recvCounts,
      @Cast("const uint64_t*") long[] recvDispls);

  public static native int npg_comm_reject(@Cast("npg_comm_t") Pointer comm, String reason);

  public static native int npg_comm_abort(@Cast("npg_comm_t") Pointer comm);

  public static native int npg_comm_destroy(@Cast("npg_comm_t") Pointer comm);

  public static native int npg_comm_rank(@Cast("npg_comm_t") Pointer comm, int[] rank);

  public static native int npg_comm_size(@Cast("npg_comm_t") Pointer comm, int[] rankSize);

  public static native @Cast("const char*") BytePointer npg_comm_transport(
      @Cast("npg_comm_t") Pointer comm);

  public static native @Cast("int64_t") long npg_live_comms();

  public static native int npg_advise_huge_pages(
      @Cast("void*") long address, @Cast("uint64_t") long bytes);

  public static native int npg_populate_pages(
      @Cast("void*") long address, @Cast("uint64_t") long bytes);

  public static native @Cast("size_t") long npg_dtype_size(@Cast("npg_dtype_t") int dtype);

  public static native @Cast("const char*") BytePointer npg_result_name(
      @Cast("npg_result_t") int result);

  public static native @Cast("const char*") BytePointer npg_last_error();

  /**
   * {@code npg_last_vendor_library}: "HCCL", "ACL", "LCAL", or "" when the last error has no vendor
   * part.
   */
  public static native @Cast("const char*") BytePointer npg_last_vendor_library();

  public static native @Cast("int64_t") long npg_last_vendor_code();

  public static native @Cast("const char*") BytePointer npg_last_vendor_code_name();

  public static native @Cast("const char*") BytePointer npg_last_vendor_message();

  public static native int npg_last_vendor_rank();
}
