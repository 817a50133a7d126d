package io.npugather.spark;

import io.npugather.NpuGatherException;
import io.npugather.ResultCode;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.spark.QueryContext;
import org.apache.spark.SparkException;
import scala.Option;

/**
 * A job that failed because one of its ranks failed, in Spark's error framework: the error class
 * ({@link #getCondition}), its SQLSTATE, the rank and the operation, with the rank's own exception
 * as the cause. A {@link SparkException}, so code that catches Spark's job failures still catches
 * it; Spark's own exception for the job is kept as a suppressed exception.
 *
 * <p>The error classes (docs/operations.md, "Errors"):
 *
 * <ul>
 *   <li>{@value #RANK_INPUT_INVALID} (SQLSTATE 22000, data exception): a rank refused its rows or
 *       arguments (a null, ranks with different shapes; the collective's {@code INVALID_ARGUMENT}
 *       and {@code INVALID_USAGE}).
 *   <li>{@value #RANK_FAILED} (SQLSTATE 58000, system error): a rank failed in the collective, its
 *       set-up or the rendezvous (a peer gone, a timeout, the network, the device).
 *   <li>{@value #RANK_FUNCTION_FAILED} (SQLSTATE 39000, external routine invocation exception, as
 *       Spark's {@code FAILED_EXECUTE_UDF}): the function of {@code onRanks} threw ({@link
 *       RankFunctionException}).
 * </ul>
 */
public final class RankFailedException extends SparkException {
  private static final long serialVersionUID = 1L;

  /** A rank failed in the collective, its set-up or the rendezvous. */
  public static final String RANK_FAILED = "NPUGATHER_RANK_FAILED";

  /** A rank refused its rows or arguments. */
  public static final String RANK_INPUT_INVALID = "NPUGATHER_RANK_INPUT_INVALID";

  /** The function of {@code onRanks} threw. */
  public static final String RANK_FUNCTION_FAILED = "NPUGATHER_RANK_FUNCTION_FAILED";

  /** The operation of a gather, as the job's failure names it. */
  public static final String GATHER = "allGatherOnNpu";

  private static final Map<String, String> SQL_STATES =
      Map.of(RANK_FAILED, "58000", RANK_INPUT_INVALID, "22000", RANK_FUNCTION_FAILED, "39000");

  private final int rank;
  private final String operation;

  private RankFailedException(
      String condition, String operation, int rank, Throwable rankFailure, String text) {
    super(
        "[" + condition + "] " + text + " SQLSTATE: " + SQL_STATES.get(condition),
        rankFailure,
        Option.apply(condition),
        SparkException.constructMessageParams(parameters(operation, rank, rankFailure)),
        new QueryContext[0],
        Option.apply(SQL_STATES.get(condition)));
    this.rank = rank;
    this.operation = operation;
  }

  /**
   * The failure of a job of {@code operation} ("allGatherOnNpu", "onRanks") that {@code rank}'s
   * {@code rankFailure} caused, with Spark's exception for the job ({@code job}, may be null)
   * suppressed.
   */
  public static RankFailedException of(
      String operation, int rank, Throwable rankFailure, Throwable job) {
    return of(operation, rank, rankFailure, job, "");
  }

  /** As {@link #of(String, int, Throwable, Throwable)}, {@code note} following "rank R failed". */
  public static RankFailedException of(
      String operation, int rank, Throwable rankFailure, Throwable job, String note) {
    RankFailedException e =
        new RankFailedException(
            conditionOf(rankFailure),
            operation,
            rank,
            rankFailure,
            operation + ": rank " + rank + " failed" + note + ": " + rankFailure);
    if (job != null) {
      e.addSuppressed(job);
    }
    return e;
  }

  /** The error class of a job that {@code rankFailure}, a rank's exception, failed. */
  public static String conditionOf(Throwable rankFailure) {
    if (rankFailure instanceof RankFunctionException) {
      return RANK_FUNCTION_FAILED;
    }
    for (Throwable t = rankFailure; t != null && t.getCause() != t; t = t.getCause()) {
      if (t instanceof NpuGatherException e) {
        return e.code() == ResultCode.INVALID_ARGUMENT || e.code() == ResultCode.INVALID_USAGE
            ? RANK_INPUT_INVALID
            : RANK_FAILED;
      }
    }
    return rankFailure instanceof IllegalArgumentException ? RANK_INPUT_INVALID : RANK_FAILED;
  }

  /** The SQLSTATE of an error class of {@link RankFailedException}. */
  public static String sqlStateOf(String condition) {
    return SQL_STATES.get(condition);
  }

  /** The rank whose failure failed the job. */
  public int rank() {
    return rank;
  }

  /** "allGatherOnNpu" or "onRanks". */
  public String operation() {
    return operation;
  }

  private static Map<String, String> parameters(String operation, int rank, Throwable rankFailure) {
    Map<String, String> parameters = new LinkedHashMap<>();
    parameters.put("operation", operation);
    parameters.put("rank", Integer.toString(rank));
    parameters.put("message", String.valueOf(rankFailure.getMessage()));
    return parameters;
  }
}
