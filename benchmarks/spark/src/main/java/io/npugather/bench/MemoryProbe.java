package io.npugather.bench;

import java.lang.management.BufferPoolMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.util.List;
import org.apache.spark.sql.util.ArrowUtils;

/**
 * Peak memory of this JVM during one measured run, sampled every {@link #PERIOD_MILLIS} ms by a
 * daemon thread (one per JVM, started on first use).
 *
 * <p>Heap: used heap (live data and garbage not yet collected, so an upper bound) above the
 * level right after the {@link #reset} GC. Off-heap: bytes held by Spark's Arrow root allocator
 * (every Arrow allocation of Spark and of the connector is a child of it) plus the JDK's direct
 * buffer pool, above their level at the reset. Netty's own pooled transfer buffers are not
 * counted. A sample can miss a peak shorter than the period.
 */
final class MemoryProbe {
  static final long PERIOD_MILLIS = 2;
  private static MemoryProbe instance;

  private final MemoryMXBean memory = ManagementFactory.getMemoryMXBean();
  private final BufferPoolMXBean direct = directPool();
  private long heapBase;
  private long offHeapBase;
  private long heapPeak;
  private long offHeapPeak;

  private MemoryProbe() {}

  static synchronized MemoryProbe get() {
    if (instance == null) {
      instance = new MemoryProbe();
      Thread sampler = new Thread(instance::sampleForever, "npugather-bench-memory-probe");
      sampler.setDaemon(true);
      sampler.start();
    }
    return instance;
  }

  /** Collects garbage and starts a new peak from the current levels. */
  synchronized void reset() {
    System.gc();
    heapBase = heapUsed();
    offHeapBase = offHeapUsed();
    heapPeak = heapBase;
    offHeapPeak = offHeapBase;
  }

  /** {heap, off-heap} peaks since the last reset, above the levels at the reset, in bytes. */
  synchronized long[] peaks() {
    sample();
    return new long[] {heapPeak - heapBase, offHeapPeak - offHeapBase};
  }

  private synchronized void sample() {
    heapPeak = Math.max(heapPeak, heapUsed());
    offHeapPeak = Math.max(offHeapPeak, offHeapUsed());
  }

  private void sampleForever() {
    while (true) {
      sample();
      try {
        Thread.sleep(PERIOD_MILLIS);
      } catch (InterruptedException e) {
        return;
      }
    }
  }

  private long heapUsed() {
    return memory.getHeapMemoryUsage().getUsed();
  }

  private long offHeapUsed() {
    long arrow = ArrowUtils.rootAllocator().getAllocatedMemory();
    return arrow + (direct == null ? 0 : direct.getMemoryUsed());
  }

  private static BufferPoolMXBean directPool() {
    List<BufferPoolMXBean> pools = ManagementFactory.getPlatformMXBeans(BufferPoolMXBean.class);
    return pools.stream().filter(p -> p.getName().equals("direct")).findFirst().orElse(null);
  }
}
