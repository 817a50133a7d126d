package io.npugather.spark;

/**
 * The function of {@link NpuGather#onRanks} threw on a rank; the cause is what it threw. The job
 * fails with a {@link RankFailedException} of error class {@value
 * RankFailedException#RANK_FUNCTION_FAILED}.
 */
public final class RankFunctionException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  RankFunctionException(String message, Throwable cause) {
    super(message, cause);
  }
}
