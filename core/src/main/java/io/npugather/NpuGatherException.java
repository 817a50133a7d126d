package io.npugather;

/**
 * A collective operation failed. Carries whose fault it is ({@link #code()}), the operation and the
 * rank that reports it; the message is the native library's text, which names both as well.
 */
public class NpuGatherException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final ResultCode code;
  private final String operation;
  private final int rank;

  public NpuGatherException(ResultCode code, String operation, int rank, String message) {
    super(code + ": " + message);
    this.code = code;
    this.operation = operation;
    this.rank = rank;
  }

  public ResultCode code() {
    return code;
  }

  public String operation() {
    return operation;
  }

  /** The reporting rank, or -1 when the failure happened before a rank was known. */
  public int rank() {
    return rank;
  }
}
