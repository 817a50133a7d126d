package io.npugather;

/** Whose fault a failed collective call is; mirrors {@code npg_result_t}. */
public enum ResultCode {
  SUCCESS,
  /** A parameter is out of range. */
  INVALID_ARGUMENT,
  /** Arguments valid alone but not together, or ranks disagree with each other. */
  INVALID_USAGE,
  /** The operating system or a library failed. */
  SYSTEM_ERROR,
  /** A peer rank failed, exited or sent something malformed. */
  REMOTE_ERROR,
  /** The communicator's timeout elapsed. */
  TIMEOUT,
  /** The communicator was aborted. */
  ABORTED,
  /** A bug in the native library. */
  INTERNAL_ERROR;

  static ResultCode fromNative(int code) {
    ResultCode[] all = values();
    return code >= 0 && code < all.length ? all[code] : INTERNAL_ERROR;
  }
}
