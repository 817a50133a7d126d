package io.npugather;

/**
 * Whose fault a failed collective call is; mirrors {@code npg_result_t} of {@code npugather.h},
 * each constant carrying the header's value ({@link #nativeCode()}).
 */
public enum ResultCode {
  SUCCESS(0),
  /** A parameter is out of range. */
  INVALID_ARGUMENT(1),
  /** Arguments valid alone but not together, or ranks disagree with each other. */
  INVALID_USAGE(2),
  /** The operating system or a library failed. */
  SYSTEM_ERROR(3),
  /** A peer rank failed, exited or sent something malformed. */
  REMOTE_ERROR(4),
  /** The communicator's timeout elapsed. */
  TIMEOUT(5),
  /** The communicator was aborted. */
  ABORTED(6),
  /** A bug in the native library. */
  INTERNAL_ERROR(7);

  private final int nativeCode;

  ResultCode(int nativeCode) {
    this.nativeCode = nativeCode;
  }

  /** The {@code npg_result_t} value of this code. */
  public int nativeCode() {
    return nativeCode;
  }

  /**
   * The code for an {@code npg_result_t} value; a value this class does not know (a native library
   * from another version) is {@link #INTERNAL_ERROR}.
   */
  static ResultCode fromNative(int code) {
    for (ResultCode c : values()) {
      if (c.nativeCode == code) {
        return c;
      }
    }
    return INTERNAL_ERROR;
  }
}
