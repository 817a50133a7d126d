package io.npugather.spark.memory;

import io.netty.util.internal.PlatformDependent;
import io.npugather.spark.Setting;
import io.npugather.spark.SettingValues;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.memory.netty.NettyAllocationManager;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.network.util.JavaUtils;

/**
 * The off-heap memory of NpuGather's tasks in this JVM: one Arrow root allocator, from which every
 * task takes a child allocator, whose buffers of {@link HugePages#ADVICE_MIN_BYTES} or more come
 * from a {@link LargeBufferCache}. Repeated gathers of about the same size then write into memory
 * that is already mapped. The cache's size and idle timeout are read once, from the Spark conf of
 * the JVM's {@code SparkEnv} ({@link #CACHE_BYTES}, {@link #CACHE_IDLE_TIMEOUT}); smaller buffers
 * are Arrow's usual ones. The bytes one task may receive in a gather are bounded ({@link
 * #receiveLimit}, {@link #MAX_GATHER_BYTES}) and checked before its receive buffer is allocated.
 */
public final class GatherMemory {
  /**
   * The most bytes of idle large buffers an executor keeps: {@code auto}, as many as the largest
   * gather so far held at once ({@link LargeBufferCache#UP_TO_PEAK}); a size; 0 keeps none.
   */
  public static final String CACHE_BYTES = "spark.npugather.memory.cacheBytes";

  /** How long a large buffer's memory is kept once no task uses it. */
  public static final String CACHE_IDLE_TIMEOUT = "spark.npugather.memory.cacheIdleTimeout";

  /** The most bytes one task may receive in a gather; default: derived from the JVM's limits. */
  public static final String MAX_GATHER_BYTES = "spark.npugather.memory.maxGatherBytes";

  /** The setting {@link #MAX_GATHER_BYTES}, as {@code SET -v} and the docs list it. */
  public static final Setting<String> MAX_GATHER_BYTES_SETTING =
      Setting.application(MAX_GATHER_BYTES, Setting.STRING)
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
          .check((key, value, written) -> checkSetting(MAX_GATHER_BYTES, value))
          .createOptional();

  /** {@link #CACHE_BYTES}'s default. */
  public static final String DEFAULT_CACHE_BYTES = "auto";

  /** The setting {@link #CACHE_BYTES}, as {@code SET -v} and the docs list it. */
  public static final Setting<String> CACHE_BYTES_SETTING =
      Setting.application(CACHE_BYTES, Setting.STRING)
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
          .check((key, value, written) -> checkSetting(CACHE_BYTES, value))
          .createWithDefault(DEFAULT_CACHE_BYTES);

  /** {@link #CACHE_BYTES}'s value that keeps what the largest gather so far needed. */
  public static final String CACHE_BYTES_AUTO = "auto";

  /** Spark's defaults for an executor's off-heap overhead (spark.executor.memoryOverhead). */
  private static final long MIN_OVERHEAD_BYTES = 384L << 20;

  private static final double DEFAULT_OVERHEAD_FACTOR = 0.1;

  /** {@link #CACHE_IDLE_TIMEOUT}'s default. */
  public static final String DEFAULT_CACHE_IDLE_TIMEOUT = "60s";

  /** The setting {@link #CACHE_IDLE_TIMEOUT}, as {@code SET -v} and the docs list it. */
  public static final Setting<String> CACHE_IDLE_TIMEOUT_SETTING =
      Setting.application(CACHE_IDLE_TIMEOUT, Setting.STRING)
          .doc("how long such memory is kept once no task uses it")
          .check((key, value, written) -> checkSetting(CACHE_IDLE_TIMEOUT, value))
          .createWithDefault(DEFAULT_CACHE_IDLE_TIMEOUT);

  private GatherMemory() {}

  private static final class Root {
    static final LargeBufferCache CACHE = newCache();
    static final BufferAllocator ALLOCATOR =
        new RootAllocator(RootAllocator.configBuilder().allocationManagerFactory(CACHE).build());
  }

  /** A child allocator for one task; the task closes it. */
  public static BufferAllocator newTaskAllocator(String name) {
    return Root.ALLOCATOR.newChildAllocator(name, 0, Long.MAX_VALUE);
  }

  /** Bytes held by the tasks' allocators now (idle cached memory is not counted). */
  public static long allocatedBytes() {
    return Root.ALLOCATOR.getAllocatedMemory();
  }

  /** The cache of large buffers' memory. */
  public static LargeBufferCache cache() {
    return Root.CACHE;
  }

  /**
   * Checks the cache's entries of the application's Spark conf, which the executors read, so that a
   * bad value fails on the driver before any task starts.
   *
   * @throws IllegalArgumentException naming the key, the value and what is allowed
   */
  public static void checkConf(SparkConf conf) {
    cacheSettings(cacheEntries(conf));
    if (conf.contains(MAX_GATHER_BYTES)) {
      receiveLimit(
          Map.of(MAX_GATHER_BYTES, conf.get(MAX_GATHER_BYTES)), false, Long.MAX_VALUE, false);
    }
  }

  /**
   * Checks one of this class's settings ({@link #CACHE_BYTES}, {@link #CACHE_IDLE_TIMEOUT}, {@link
   * #MAX_GATHER_BYTES}) as a user sets it.
   *
   * @throws IllegalArgumentException naming the key, the value and what is allowed
   */
  public static void checkSetting(String key, String value) {
    if (key.equals(MAX_GATHER_BYTES)) {
      receiveLimit(Map.of(MAX_GATHER_BYTES, value), false, Long.MAX_VALUE, false);
    } else {
      cacheSettings(Map.of(key, value));
    }
  }

  /**
   * The most idle bytes ({@link LargeBufferCache#UP_TO_PEAK} for {@code auto}) and the idle timeout
   * {@code conf} asks for.
   */
  record CacheSettings(long maxIdleBytes, Duration idleTimeout) {}

  static CacheSettings cacheSettings(Map<String, String> conf) {
    String bytesValue = conf.getOrDefault(CACHE_BYTES, DEFAULT_CACHE_BYTES);
    long maxIdleBytes;
    if (bytesValue.trim().equalsIgnoreCase(CACHE_BYTES_AUTO)) {
      maxIdleBytes = LargeBufferCache.UP_TO_PEAK;
    } else {
      try {
        maxIdleBytes = JavaUtils.byteStringAsBytes(bytesValue.trim());
      } catch (NumberFormatException e) {
        maxIdleBytes = -1;
      }
      if (maxIdleBytes < 0) {
        throw invalid(
            CACHE_BYTES,
            "'" + bytesValue + "'",
            "auto (as much as the largest gather so far held), 0 (keep none) or a size such as"
                + " 512m or 2g");
      }
    }
    String timeoutValue = conf.getOrDefault(CACHE_IDLE_TIMEOUT, DEFAULT_CACHE_IDLE_TIMEOUT);
    Duration idleTimeout;
    try {
      idleTimeout = Duration.ofMillis(JavaUtils.timeStringAsMs(timeoutValue.trim()));
    } catch (NumberFormatException e) {
      throw invalid(
          CACHE_IDLE_TIMEOUT, "'" + timeoutValue + "'", "a duration such as 120s, 5m or 500ms");
    }
    if (idleTimeout.isZero() || idleTimeout.isNegative()) {
      throw invalid(
          CACHE_IDLE_TIMEOUT, "'" + timeoutValue + "'", "a positive duration such as 60s or 5m");
    }
    return new CacheSettings(maxIdleBytes, idleTimeout);
  }

  /**
   * A receive limit and the setting it comes from, as the error names it.
   *
   * @param bytes the most bytes one task may receive
   * @param source the setting or JVM limit that sets it
   */
  public record ReceiveLimit(long bytes, String source) {}

  /** This JVM's limit for the bytes one task receives in a gather (read once). */
  public static ReceiveLimit receiveLimit() {
    return Limit.RECEIVE;
  }

  private static final class Limit {
    static final ReceiveLimit RECEIVE = computeReceiveLimit();
  }

  private static ReceiveLimit computeReceiveLimit() {
    SparkEnv env = SparkEnv.get();
    Map<String, String> conf = new HashMap<>();
    boolean executor = false;
    if (env != null) {
      for (scala.Tuple2<String, String> entry : env.conf().getAll()) {
        conf.put(entry._1(), entry._2());
      }
      String master = conf.getOrDefault("spark.master", "");
      executor = !env.executorId().equals("driver") && !master.startsWith("local");
    }
    boolean explicitDirect =
        ManagementFactory.getRuntimeMXBean().getInputArguments().stream()
            .anyMatch(a -> a.startsWith("-XX:MaxDirectMemorySize="));
    return receiveLimit(conf, executor, PlatformDependent.maxDirectMemory(), explicitDirect);
  }

  /**
   * The limit {@code conf} sets ({@link #MAX_GATHER_BYTES}), else the smaller of the JVM's direct
   * memory limit and, on an executor, its off-heap budget (spark.executor.memoryOverhead, by
   * default max(384m, 0.1 x spark.executor.memory), plus spark.memory.offHeap.size when enabled).
   */
  static ReceiveLimit receiveLimit(
      Map<String, String> conf, boolean executor, long maxDirectBytes, boolean explicitDirect) {
    String value = conf.get(MAX_GATHER_BYTES);
    if (value != null) {
      long bytes = SettingValues.positiveBytes(MAX_GATHER_BYTES, value);
      return new ReceiveLimit(bytes, MAX_GATHER_BYTES + "=" + value.trim());
    }
    ReceiveLimit limit =
        new ReceiveLimit(
            maxDirectBytes,
            explicitDirect
                ? "-XX:MaxDirectMemorySize"
                : "the JVM's direct memory limit (-XX:MaxDirectMemorySize, by default the heap size -Xmx)");
    if (executor) {
      long overhead;
      String source;
      if (conf.containsKey("spark.executor.memoryOverhead")) {
        overhead = JavaUtils.byteStringAsMb(conf.get("spark.executor.memoryOverhead")) << 20;
        source = "spark.executor.memoryOverhead";
      } else {
        long heap =
            JavaUtils.byteStringAsMb(conf.getOrDefault("spark.executor.memory", "1g")) << 20;
        double factor =
            Double.parseDouble(
                conf.getOrDefault(
                    "spark.executor.memoryOverheadFactor",
                    String.valueOf(DEFAULT_OVERHEAD_FACTOR)));
        overhead = Math.max(MIN_OVERHEAD_BYTES, (long) (factor * heap));
        source =
            "spark.executor.memoryOverhead (by default max(384m, 0.1 x spark.executor.memory))";
      }
      if (Boolean.parseBoolean(conf.getOrDefault("spark.memory.offHeap.enabled", "false"))) {
        overhead +=
            JavaUtils.byteStringAsBytes(conf.getOrDefault("spark.memory.offHeap.size", "0"));
        source += " plus spark.memory.offHeap.size";
      }
      if (overhead < limit.bytes()) {
        limit = new ReceiveLimit(overhead, source);
      }
    }
    return limit;
  }

  private static Map<String, String> cacheEntries(SparkConf conf) {
    Map<String, String> entries = new HashMap<>();
    for (String key : List.of(CACHE_BYTES, CACHE_IDLE_TIMEOUT)) {
      if (conf.contains(key)) {
        entries.put(key, conf.get(key));
      }
    }
    return entries;
  }

  private static LargeBufferCache newCache() {
    SparkEnv env = SparkEnv.get(); // none outside Spark: the defaults
    CacheSettings settings = cacheSettings(env == null ? Map.of() : cacheEntries(env.conf()));
    return new LargeBufferCache(
        NettyAllocationManager.FACTORY,
        HugePages.ADVICE_MIN_BYTES,
        settings.maxIdleBytes(),
        settings.idleTimeout());
  }

  /** The same text as every other setting's error: the key, the value and what is allowed. */
  private static IllegalArgumentException invalid(String key, String value, String allowed) {
    return new IllegalArgumentException(key + " = " + value + " is invalid; allowed: " + allowed);
  }
}
