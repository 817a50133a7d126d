package io.npugather.spark;

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
}
