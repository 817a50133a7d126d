package io.npugather.spark;

import java.time.Duration;
import org.apache.spark.network.util.JavaUtils;

/**
 * Values of {@code spark.npugather.*} settings as users write them, parsed with Spark's own
 * parsers; a bad value is an {@link IllegalArgumentException} naming the key, the value and what is
 * allowed.
 */
public final class SettingValues {
  private SettingValues() {}

  /** {@code true} or {@code false}, in any case, around blanks. */
  public static boolean trueOrFalse(String key, String value) {
    String v = value == null ? "" : value.trim();
    if (v.equalsIgnoreCase("true")) {
      return true;
    }
    if (v.equalsIgnoreCase("false")) {
      return false;
    }
    throw new IllegalArgumentException(key + " = " + value + " is invalid; allowed: true or false");
  }

  /** A positive size in bytes, as Spark writes sizes (512m, 8g, 1048576). */
  public static long positiveBytes(String key, String value) {
    long bytes;
    try {
      bytes = JavaUtils.byteStringAsBytes(value.trim());
    } catch (RuntimeException e) {
      bytes = -1;
    }
    if (bytes <= 0) {
      throw new IllegalArgumentException(
          key + " = '" + value + "' is invalid; allowed: a positive size such as 512m or 8g");
    }
    return bytes;
  }

  /**
   * {@code duration} as Spark's time strings write it, in the largest unit that holds it exactly
   * (500ms, 30s, 5m, 2h, 3d; 0ms for zero), for messages and plans: not Java's PT30S.
   */
  public static String durationText(Duration duration) {
    if (duration.isNegative() || duration.toNanosPart() % 1_000_000 != 0) {
      return duration.toString(); // no Spark time string holds it
    }
    long millis = duration.toMillis();
    long[] unitMillis = {86_400_000L, 3_600_000L, 60_000L, 1_000L};
    String[] units = {"d", "h", "m", "s"};
    for (int i = 0; i < units.length; i++) {
      if (millis != 0 && millis % unitMillis[i] == 0) {
        return millis / unitMillis[i] + units[i];
      }
    }
    return millis + "ms";
  }
}
