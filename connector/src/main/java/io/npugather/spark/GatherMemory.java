package io.npugather.spark;

import io.npugather.Communicator;
import io.npugather.spark.arrow.LargeBufferCache;
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
 * The off-heap memory of NpuGather's tasks in this JVM: one Arrow root allocator, from which
 * every task takes a child allocator, whose buffers of {@link
 * Communicator#HUGE_PAGE_ADVICE_MIN_BYTES} or more come from a {@link LargeBufferCache}.
 * Repeated gathers of about the same size then write into memory that is already mapped. The
 * cache's size and idle timeout are read once, from the Spark conf of the JVM's {@code SparkEnv}
 * ({@link #CACHE_BYTES}, {@link #CACHE_IDLE_TIMEOUT}); smaller buffers are Arrow's usual ones.
 */
public final class GatherMemory {
  /** The most bytes of idle large buffers an executor keeps; 0 keeps none. */
  public static final String CACHE_BYTES = "spark.npugather.memory.cacheBytes";
  /** How long a large buffer's memory is kept once no task uses it. */
  public static final String CACHE_IDLE_TIMEOUT = "spark.npugather.memory.cacheIdleTimeout";

  static final String DEFAULT_CACHE_BYTES = "1g";
  static final String DEFAULT_CACHE_IDLE_TIMEOUT = "60s";

  private GatherMemory() {}

  private static final class Root {
    static final LargeBufferCache CACHE = newCache();
    static final BufferAllocator ALLOCATOR = new RootAllocator(
        RootAllocator.configBuilder().allocationManagerFactory(CACHE).build());
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
   * Checks the cache's entries of the application's Spark conf, which the executors read, so
   * that a bad value fails on the driver before any task starts.
   *
   * @throws IllegalArgumentException naming the key, the value and what is allowed
   */
  public static void checkConf(SparkConf conf) {
    cacheSettings(cacheEntries(conf));
  }

  /** The most idle bytes and the idle timeout {@code conf} asks for. */
  record CacheSettings(long maxIdleBytes, Duration idleTimeout) {}

  static CacheSettings cacheSettings(Map<String, String> conf) {
    String bytesValue = conf.getOrDefault(CACHE_BYTES, DEFAULT_CACHE_BYTES);
    long maxIdleBytes;
    try {
      maxIdleBytes = JavaUtils.byteStringAsBytes(bytesValue.trim());
    } catch (NumberFormatException e) {
      maxIdleBytes = -1;
    }
    if (maxIdleBytes < 0) {
      throw AllGatherOptions.invalid(CACHE_BYTES, "'" + bytesValue + "'",
          "0 (keep none) or a size such as 512m or 2g");
    }
    String timeoutValue = conf.getOrDefault(CACHE_IDLE_TIMEOUT, DEFAULT_CACHE_IDLE_TIMEOUT);
    Duration idleTimeout = AllGatherOptions.parseDuration(CACHE_IDLE_TIMEOUT, timeoutValue);
    if (idleTimeout.isZero() || idleTimeout.isNegative()) {
      throw AllGatherOptions.invalid(CACHE_IDLE_TIMEOUT, "'" + timeoutValue + "'",
          "a positive duration such as 60s or 5m");
    }
    return new CacheSettings(maxIdleBytes, idleTimeout);
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
    return new LargeBufferCache(NettyAllocationManager.FACTORY,
        Communicator.HUGE_PAGE_ADVICE_MIN_BYTES, settings.maxIdleBytes(), settings.idleTimeout());
  }
}
