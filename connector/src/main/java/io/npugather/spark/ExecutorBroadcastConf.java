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

  /** The setting {@link #AUTO}, as {@code SET -v} and the docs list it. */
  public static final Setting<String> AUTO_SETTING =
      Setting.session(AUTO, Setting.STRING)
          .doc(
              "session setting, with the SQL extension: `true` plans an equi-join"
                  + " without hints whose build side is larger than Spark would broadcast"
                  + " and at most `spark.npugather.join.maxBuildBytes` as if it carried"
                  + " the `ALLGATHER` hint (\"Joins against a table every executor"
                  + " holds\")")
          .check((key, value, written) -> auto(value))
          .createWithDefault(DEFAULT_AUTO);

  /** The largest build side a join gathers, in Spark's measure of its size. */
  public static final String MAX_BUILD_BYTES = "spark.npugather.join.maxBuildBytes";

  /** Spark's own hard limit of a broadcast table. */
  public static final String DEFAULT_MAX_BUILD_BYTES = "8g";

  /** The setting {@link #MAX_BUILD_BYTES}, as {@code SET -v} and the docs list it. */
  public static final Setting<String> MAX_BUILD_BYTES_SETTING =
      Setting.session(MAX_BUILD_BYTES, Setting.STRING)
          .doc(
              "session setting: the largest build side a join with the `ALLGATHER`"
                  + " hint gathers, in Spark's measure (the bytes of its rows, measured"
                  + " before the gather); a larger one fails before the gather starts."
                  + " Also the upper bound of the automatic mode")
          .check((key, value, written) -> maxBuildBytes(value))
          .createWithDefault(DEFAULT_MAX_BUILD_BYTES);

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
