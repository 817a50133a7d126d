package io.npugather.spark;

import io.npugather.spark.memory.GatherMemory;
import io.npugather.spark.output.GatheredOutputs;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * Every {@code spark.npugather.*} setting, each declared once as a {@link Setting}: its key, type,
 * default, meaning and check. Spark's SQL conf holds them ({@code
 * org.apache.spark.npugather.NpuGatherSqlConf}), so {@code SET -v} lists them and Spark checks a
 * value when it is set; a {@code spark.npugather.*} key that is none of them is refused naming the
 * nearest ({@link #requireKnownKeys}).
 */
public final class NpuGatherConf {
  /** Prefix of every setting. */
  public static final String PREFIX = AllGatherOptions.CONF_PREFIX + AllGatherOptions.KEY_PREFIX;

  /**
   * Every setting, in the order the docs list them: the options of {@link AllGatherOptions}, then
   * the application's settings, then the session's.
   */
  public static final List<Setting<?>> SETTINGS =
      Stream.concat(
              AllGatherOptions.OPTIONS.stream(),
              Stream.of(
                  GatherMemory.CACHE_BYTES_SETTING,
                  GatherMemory.CACHE_IDLE_TIMEOUT_SETTING,
                  GatherMemory.MAX_GATHER_BYTES_SETTING,
                  ClusterCheck.EXECUTOR_WAIT_SETTING,
                  GatheredOutputs.RELEASE_DELAY_SETTING,
                  GatheredOutputs.ONE_PER_EXECUTOR_SETTING,
                  ExecutorBroadcastConf.AUTO_SETTING,
                  ExecutorBroadcastConf.MAX_BUILD_BYTES_SETTING))
          .toList();

  private NpuGatherConf() {}

  /** The Spark conf keys of {@link #SETTINGS}. */
  public static List<String> keys() {
    return SETTINGS.stream().map(Setting::confKey).toList();
  }

  /**
   * Refuses a {@code spark.npugather.*} key of {@code conf} that is no setting, naming it and the
   * nearest setting.
   *
   * @throws IllegalArgumentException for the first such key
   */
  public static void requireKnownKeys(Map<String, String> conf) {
    List<String> keys = keys();
    for (String key : conf.keySet()) {
      if (key.startsWith(PREFIX) && !keys.contains(key)) {
        throw new IllegalArgumentException(
            key
                + " is not a setting of NpuGather; did you mean "
                + nearest(key, keys)
                + "? (SET -v lists every "
                + PREFIX
                + "* setting)");
      }
    }
  }

  /** The candidate closest to {@code written} in edit distance (ignoring case); first on ties. */
  static String nearest(String written, Collection<String> candidates) {
    String best = null;
    int bestDistance = Integer.MAX_VALUE;
    for (String candidate : candidates) {
      int distance =
          editDistance(
              written.toLowerCase(java.util.Locale.ROOT),
              candidate.toLowerCase(java.util.Locale.ROOT));
      if (distance < bestDistance) {
        best = candidate;
        bestDistance = distance;
      }
    }
    return best;
  }

  /** Levenshtein distance: insertions, deletions and substitutions. */
  private static int editDistance(String a, String b) {
    int[] previous = new int[b.length() + 1];
    int[] current = new int[b.length() + 1];
    for (int j = 0; j <= b.length(); j++) {
      previous[j] = j;
    }
    for (int i = 1; i <= a.length(); i++) {
      current[0] = i;
      for (int j = 1; j <= b.length(); j++) {
        int substitution = previous[j - 1] + (a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1);
        current[j] = Math.min(substitution, Math.min(previous[j], current[j - 1]) + 1);
      }
      int[] swap = previous;
      previous = current;
      current = swap;
    }
    return previous[b.length()];
  }
}
