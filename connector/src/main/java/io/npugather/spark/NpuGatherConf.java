package io.npugather.spark;

import io.npugather.Backend;
import io.npugather.spark.memory.GatherMemory;
import io.npugather.spark.output.GatheredOutputs;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/**
 * Every {@code spark.npugather.*} setting: its key, default, meaning and check. Spark's SQL conf
 * holds them ({@code org.apache.spark.npugather.NpuGatherSqlConf}), so {@code SET -v} lists them
 * and Spark checks a value when it is set; a {@code spark.npugather.*} key that is none of them is
 * refused naming the nearest ({@link #requireKnownKeys}).
 */
public final class NpuGatherConf {
  /** Prefix of every setting. */
  public static final String PREFIX = AllGatherOptions.CONF_PREFIX + AllGatherOptions.KEY_PREFIX;

  /** Where a setting is read. */
  public enum Scope {
    /** Read from the session's conf when an {@code allGatherOnNpu} is called or run. */
    SESSION,
    /**
     * Read from the application's Spark conf by every JVM (set at submit time or in
     * spark-defaults.conf; Spark refuses to change it in a running session).
     */
    APPLICATION
  }

  /**
   * One setting. {@code defaultValue} null: the default is derived (the doc says how); {@code
   * check} throws an {@link IllegalArgumentException} naming the key, the value and what is
   * allowed.
   */
  public record Setting(
      String key, String defaultValue, String doc, Scope scope, Consumer<String> check) {}

  /** Every setting, in the order the docs list them. */
  public static final List<Setting> SETTINGS =
      List.of(
          option(
              AllGatherOptions.BACKEND,
              Backend.SPARK_DEFAULT.wireName(),
              "host (CPU collective), hccl or lccl (Ascend NPUs)."),
          option(
              AllGatherOptions.RANK_SIZE,
              "0",
              "0: one rank per input partition (at most 65536 partitions); N, 1 <= N <= 65536:"
                  + " repartition the input to N partitions first."),
          option(
              AllGatherOptions.RANK_ROOT,
              "0",
              "The rank that creates the communicator's root info; 0 <= rankRoot < rankSize."),
          option(
              AllGatherOptions.COMM_DOMAIN,
              "",
              "Communication domain name, at most 96 UTF-8 bytes without NUL characters; a unique"
                  + " suffix is added for every run so concurrent jobs never collide."),
          option(
              AllGatherOptions.TIMEOUT,
              "120s",
              "Bounds every wait: rendezvous, communicator set-up, the collective (500ms, 30s, 5m,"
                  + " ...; positive, at most 30 days)."),
          option(
              AllGatherOptions.SOURCE_RANK_COLUMN,
              "source_rank",
              "Name of the source-rank column of the result; must not collide with an input column."),
          option(
              AllGatherOptions.RESOURCE_NAME,
              "npu",
              "The Spark resource that holds the devices: the first address of the task's resource"
                  + " on a cluster, the driver's address r for rank r on a local master."),
          option(
              AllGatherOptions.RETRYABLE,
              "false",
              "true lets Spark run a failed gather again; false fails the job at the first failed"
                  + " attempt."),
          option(
              AllGatherOptions.HOST_TRANSPORT,
              "auto",
              "Backend host: auto (shared memory on one host, TCP across hosts), tcp or staging."),
          option(
              AllGatherOptions.INJECT_FAILURE,
              "",
              "Testing aid: RANK or RANK:ATTEMPT (each at most 9 digits) makes that rank fail in"
                  + " that stage attempt."),
          new Setting(
              GatheredOutputs.RELEASE_DELAY,
              GatheredOutputs.DEFAULT_RELEASE_DELAY,
              "How long a gather's output is kept after the last job that read it ended, so that"
                  + " later actions read it without gathering again.",
              Scope.SESSION,
              GatheredOutputs::releaseDelayMs),
          new Setting(
              GatheredOutputs.ONE_PER_EXECUTOR,
              GatheredOutputs.DEFAULT_ONE_PER_EXECUTOR,
              "Backend host: true, the ranks that share an executor gather one output together, so"
                  + " the executor holds every row once; false, every rank gathers a copy of its"
                  + " own.",
              Scope.SESSION,
              GatheredOutputs::onePerExecutor),
          new Setting(
              ExecutorBroadcastConf.AUTO,
              ExecutorBroadcastConf.DEFAULT_AUTO,
              "With the SQL extension: true plans an equi-join whose build side is larger than"
                  + " Spark would broadcast (spark.sql.autoBroadcastJoinThreshold; with adaptive"
                  + " execution re-checked at runtime), and at most"
                  + " spark.npugather.join.maxBuildBytes, as if it carried the ALLGATHER hint.",
              Scope.SESSION,
              ExecutorBroadcastConf::auto),
          new Setting(
              ExecutorBroadcastConf.MAX_BUILD_BYTES,
              ExecutorBroadcastConf.DEFAULT_MAX_BUILD_BYTES,
              "The largest build side a join with the ALLGATHER hint gathers (Spark's size of its"
                  + " rows, measured before the gather); a larger one fails before any row is"
                  + " gathered. Also the upper bound of spark.npugather.join.auto.",
              Scope.SESSION,
              ExecutorBroadcastConf::maxBuildBytes),
          new Setting(
              GatherMemory.CACHE_BYTES,
              GatherMemory.DEFAULT_CACHE_BYTES,
              "The most memory of large buffers (4 MiB and more) an executor keeps idle for the next"
                  + " gathers: auto, as much as the largest gather so far held at once; a size;"
                  + " 0 keeps none. Count it in spark.executor.memoryOverhead.",
              Scope.APPLICATION,
              value -> GatherMemory.checkSetting(GatherMemory.CACHE_BYTES, value)),
          new Setting(
              GatherMemory.CACHE_IDLE_TIMEOUT,
              GatherMemory.DEFAULT_CACHE_IDLE_TIMEOUT,
              "How long such memory is kept once no task uses it.",
              Scope.APPLICATION,
              value -> GatherMemory.checkSetting(GatherMemory.CACHE_IDLE_TIMEOUT, value)),
          new Setting(
              GatherMemory.MAX_GATHER_BYTES,
              null,
              "The most bytes one task may receive in a gather. Default: the JVM's direct memory"
                  + " limit and, on an executor, no more than its off-heap budget"
                  + " (spark.executor.memoryOverhead, plus spark.memory.offHeap.size when enabled).",
              Scope.APPLICATION,
              value -> GatherMemory.checkSetting(GatherMemory.MAX_GATHER_BYTES, value)),
          new Setting(
              ClusterCheck.EXECUTOR_WAIT_CONF,
              ClusterCheck.DEFAULT_EXECUTOR_WAIT,
              "How long the driver waits, on a cluster master, for executors to register before"
                  + " deciding that the cluster has too few task slots for the ranks.",
              Scope.APPLICATION,
              ClusterCheck::checkExecutorWait));

  private NpuGatherConf() {}

  private static Setting option(String key, String defaultValue, String doc) {
    String confKey = AllGatherOptions.CONF_PREFIX + key;
    return new Setting(
        confKey,
        defaultValue,
        "Default of the option " + key + " of" + " allGatherOnNpu and onRanks: " + doc,
        Scope.SESSION,
        value -> AllGatherOptions.defaults().with(Map.of(confKey, value)));
  }

  /** The keys of {@link #SETTINGS}. */
  public static List<String> keys() {
    return SETTINGS.stream().map(Setting::key).toList();
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
