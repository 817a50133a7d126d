package io.npugather.spark;

import java.util.Locale;

/**
 * The settings of joins whose build side is all-gathered onto the executors (the {@code ALLGATHER}
 * hint): whether the planner picks such joins by itself, and the largest build side it gathers.
 */
public final class ExecutorBroadcastConf {

  /**
   * true: equi-joins whose build side Spark would not broadcast, and not above {@link
   * #MAX_BUILD_BYTES}, are planned as if hinted.
   */
  public static final String AUTO = "spark.npugather.join.auto";

  public static final String DEFAULT_AUTO = "false";

  /** The largest build side a join gathers, in Spark's measure of its size. */
  public static final String MAX_BUILD_BYTES = "spark.npugather.join.maxBuildBytes";

  /** Spark's own hard limit of a broadcast table. */
  public static final String DEFAULT_MAX_BUILD_BYTES = "8g";

  private ExecutorBroadcastConf() {}

  /**
   * {@code value} of {@link #AUTO}.
   *
   * @throws IllegalArgumentException naming the key, the value and what is allowed
   */
  public static boolean auto(String value) {
    return SettingValues.trueOrFalse(AUTO, value);
  }

  /**
   * {@code value} of {@link #MAX_BUILD_BYTES} in bytes.
   *
   * @throws IllegalArgumentException naming the key, the value and what is allowed
   */
  public static long maxBuildBytes(String value) {
    return SettingValues.positiveBytes(MAX_BUILD_BYTES, value);
  }

  /**
   * The refusal of a build side of {@code bytes} above {@code limitBytes} ({@link #MAX_BUILD_BYTES}
   * set to {@code limit}), in one line.
   */
  public static IllegalStateException buildSideTooLarge(long bytes, long limitBytes, String limit) {
    return new IllegalStateException(
        String.format(
            Locale.ROOT,
            "the ALLGATHER build side is %d bytes (%s, Spark's size of its rows before the"
                + " gather), above its limit of %d bytes from %s=%s; raise that setting or drop"
                + " the hint so that Spark plans the join",
            bytes,
            readable(bytes),
            limitBytes,
            MAX_BUILD_BYTES,
            limit.trim()));
  }

  static String readable(long bytes) {
    return bytes >= 1L << 30
        ? String.format(Locale.ROOT, "%.1f GiB", bytes / (double) (1L << 30))
        : String.format(Locale.ROOT, "%.1f MiB", bytes / (double) (1L << 20));
  }
}
