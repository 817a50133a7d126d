package io.npugather.spark;

import io.npugather.spark.memory.GatherMemory;
import io.npugather.spark.output.GatheredOutputs;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
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
                  Setting.application(GatherMemory.CACHE_BYTES, Setting.STRING)
                      .doc(
                          "the most memory of large buffers (4 MiB and more: partitions' Arrow"
                              + " vectors, receive buffers) an executor keeps idle for the next"
                              + " gathers, so they write into memory already mapped. `auto`: as much"
                              + " as the largest gather so far held at once, so the next gather of"
                              + " that size finds all of it mapped, and the executor never holds more"
                              + " than that peak (or than what it uses now) in lent and idle buffers"
                              + " together; a size such as `512m` caps it; `0` keeps none. The peak"
                              + " is memory the executor's off-heap overhead"
                              + " (`spark.executor.memoryOverhead`) must hold anyway")
                      .check(
                          checking(
                              value -> GatherMemory.checkSetting(GatherMemory.CACHE_BYTES, value)))
                      .createWithDefault(GatherMemory.DEFAULT_CACHE_BYTES),
                  Setting.application(GatherMemory.CACHE_IDLE_TIMEOUT, Setting.STRING)
                      .doc("how long such memory is kept once no task uses it")
                      .check(
                          checking(
                              value ->
                                  GatherMemory.checkSetting(
                                      GatherMemory.CACHE_IDLE_TIMEOUT, value)))
                      .createWithDefault(GatherMemory.DEFAULT_CACHE_IDLE_TIMEOUT),
                  Setting.application(GatherMemory.MAX_GATHER_BYTES, Setting.STRING)
                      .doc(
                          "the most bytes one task may receive in a gather (the other ranks'"
                              + " blocks), checked on every rank against every rank's limit before"
                              + " any buffer is allocated, so all fail together naming the rank, the"
                              + " bytes it needs and the setting to raise. Default: the JVM's direct"
                              + " memory limit (`-XX:MaxDirectMemorySize`, by default the heap size)"
                              + " and, on an executor, no more than its off-heap budget"
                              + " (`spark.executor.memoryOverhead`, by default max(384m, 0.1 ×"
                              + " `spark.executor.memory`), plus `spark.memory.offHeap.size` when"
                              + " enabled)")
                      .check(
                          checking(
                              value ->
                                  GatherMemory.checkSetting(GatherMemory.MAX_GATHER_BYTES, value)))
                      .createOptional(),
                  Setting.application(ClusterCheck.EXECUTOR_WAIT_CONF, Setting.STRING)
                      .doc(
                          "on a cluster master, how long the driver waits for executors to"
                              + " register before deciding that the cluster has too few task slots")
                      .check(checking(ClusterCheck::checkExecutorWait))
                      .createWithDefault(ClusterCheck.DEFAULT_EXECUTOR_WAIT),
                  Setting.session(GatheredOutputs.RELEASE_DELAY, Setting.STRING)
                      .doc(
                          "session setting: how long a gather's output is kept after the last"
                              + " job that read it ended")
                      .check(checking(GatheredOutputs::releaseDelayMs))
                      .createWithDefault(GatheredOutputs.DEFAULT_RELEASE_DELAY),
                  Setting.session(GatheredOutputs.ONE_PER_EXECUTOR, Setting.STRING)
                      .doc(
                          "session setting, backend `host`: `true`, the ranks that share an"
                              + " executor gather one output together, so the executor holds every"
                              + " row once; `false`, every rank gathers a copy of its own")
                      .check(checking(GatheredOutputs::onePerExecutor))
                      .createWithDefault(GatheredOutputs.DEFAULT_ONE_PER_EXECUTOR),
                  Setting.session(ExecutorBroadcastConf.AUTO, Setting.STRING)
                      .doc(
                          "session setting, with the SQL extension: `true` plans an equi-join"
                              + " without hints whose build side is larger than Spark would broadcast"
                              + " and at most `spark.npugather.join.maxBuildBytes` as if it carried"
                              + " the `ALLGATHER` hint (\"Joins against a table every executor"
                              + " holds\")")
                      .check(checking(ExecutorBroadcastConf::auto))
                      .createWithDefault(ExecutorBroadcastConf.DEFAULT_AUTO),
                  Setting.session(ExecutorBroadcastConf.MAX_BUILD_BYTES, Setting.STRING)
                      .doc(
                          "session setting: the largest build side a join with the `ALLGATHER`"
                              + " hint gathers, in Spark's measure (the bytes of its rows, measured"
                              + " before the gather); a larger one fails before the gather starts."
                              + " Also the upper bound of the automatic mode")
                      .check(checking(ExecutorBroadcastConf::maxBuildBytes))
                      .createWithDefault(ExecutorBroadcastConf.DEFAULT_MAX_BUILD_BYTES)))
          .toList();

  private NpuGatherConf() {}

  /** A check of a setting's text by the code that reads it. */
  private static Setting.Check<String> checking(Consumer<String> read) {
    return (key, value, written) -> read.accept(value);
  }

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
