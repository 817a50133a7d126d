package io.npugather.bench;

import com.sun.management.GarbageCollectionNotificationInfo;
import io.npugather.spark.memory.GatherMemory;
import java.lang.management.BufferPoolMXBean;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.lang.management.MemoryUsage;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import javax.management.Notification;
import javax.management.NotificationEmitter;
import javax.management.openmbean.CompositeData;
import org.apache.spark.sql.util.ArrowUtils;

/**
 * Peak memory of this JVM during one measured run, sampled every {@link #PERIOD_MILLIS} ms by a
 * daemon thread (one per JVM, started on first use).
 *
 * <p>Heap, two figures above the level right after the {@link #reset} GC: the sampled used heap
 * (live data and garbage not yet collected, an upper bound), and the heap left after each GC during
 * the run (live data, plus old garbage a young GC keeps; 0 when no GC ran). Off-heap: bytes held by
 * Spark's Arrow root allocator and by NpuGather's ({@link GatherMemory}: its tasks' allocators)
 * plus the JDK's direct buffer pool, above their level at the reset. The idle memory NpuGather's
 * cache keeps between gathers is not counted (docs/benchmarks.md gives its bound). Netty's own
 * pooled transfer buffers are not counted. A sample can miss a peak shorter than the period.
 */
final class MemoryProbe {
  static final long PERIOD_MILLIS = 2;
  private static MemoryProbe instance;

  private final MemoryMXBean memory = ManagementFactory.getMemoryMXBean();
  private final BufferPoolMXBean direct = directPool();
  private long heapBase;
  private long offHeapBase;
  private final Set<String> heapPools =
      ManagementFactory.getMemoryPoolMXBeans().stream()
          .filter(p -> p.getType() == MemoryType.HEAP)
          .map(MemoryPoolMXBean::getName)
          .collect(Collectors.toSet());
  private long heapPeak;
  private long afterGcPeak;
  private long offHeapPeak;

  private MemoryProbe() {
    for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
      if (gc instanceof NotificationEmitter emitter) {
        emitter.addNotificationListener(
            (notification, handback) -> afterGc(notification),
            n ->
                n.getType()
                    .equals(GarbageCollectionNotificationInfo.GARBAGE_COLLECTION_NOTIFICATION),
            null);
      }
    }
  }

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
    afterGcPeak = heapBase;
    offHeapPeak = offHeapBase;
  }

  /**
   * {used heap, heap after GC, off-heap} peaks since the last reset, above the levels at the reset,
   * in bytes.
   */
  synchronized long[] peaks() {
    sample();
    return new long[] {heapPeak - heapBase, afterGcPeak - heapBase, offHeapPeak - offHeapBase};
  }

  private synchronized void afterGc(Notification notification) {
    GarbageCollectionNotificationInfo info =
        GarbageCollectionNotificationInfo.from((CompositeData) notification.getUserData());
    long heap = 0;
    for (var pool : info.getGcInfo().getMemoryUsageAfterGc().entrySet()) {
      if (heapPools.contains(pool.getKey())) {
        MemoryUsage usage = pool.getValue();
        heap += usage.getUsed();
      }
    }
    afterGcPeak = Math.max(afterGcPeak, heap);
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
    long arrow = ArrowUtils.rootAllocator().getAllocatedMemory() + GatherMemory.allocatedBytes();
    return arrow + (direct == null ? 0 : direct.getMemoryUsed());
  }

  private static BufferPoolMXBean directPool() {
    List<BufferPoolMXBean> pools = ManagementFactory.getPlatformMXBeans(BufferPoolMXBean.class);
    return pools.stream().filter(p -> p.getName().equals("direct")).findFirst().orElse(null);
  }
}
