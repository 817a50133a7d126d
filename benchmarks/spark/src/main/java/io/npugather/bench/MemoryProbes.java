package io.npugather.bench;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.SparkEnv;

/**
 * Resets and reads the {@link MemoryProbe} of every executor JVM and of the driver. A barrier stage
 * of one task per rank reaches every executor: barrier mode needs all tasks running at once, and
 * with one core per executor JVM that is one task per executor.
 */
final class MemoryProbes {
  private MemoryProbes() {}

  static void reset(BenchInput input) {
    onEveryExecutor(input, true);
    MemoryProbe.get().reset();
  }

  /**
   * {used heap, heap after GC, off-heap} peaks of the highest executor, then the driver's used heap
   * peak, in bytes.
   */
  static long[] read(BenchInput input) {
    long driverHeap = MemoryProbe.get().peaks()[0];
    long[] highest = new long[4];
    for (long[] p : onEveryExecutor(input, false)) {
      for (int i = 0; i < p.length; i++) {
        highest[i] = Math.max(highest[i], p[i]);
      }
    }
    highest[3] = driverHeap;
    return highest;
  }

  /** Per executor JVM: {@link MemoryProbe#peaks} (reading) or zeros (resetting). */
  private static List<long[]> onEveryExecutor(BenchInput input, boolean reset) {
    List<Integer> slots = new ArrayList<>();
    for (int r = 0; r < input.ranks(); r++) {
      slots.add(r);
    }
    List<String> replies =
        Barrier.collect(
            input.jsc().parallelize(slots, input.ranks()).rdd(),
            String.class,
            (partition, ignored) -> {
              MemoryProbe probe = MemoryProbe.get();
              long[] peaks = new long[3];
              if (reset) {
                synchronized (MemoryProbe.class) {
                  probe.reset();
                }
              } else {
                peaks = probe.peaks();
              }
              return SparkEnv.get().executorId() + "," + peaks[0] + "," + peaks[1] + "," + peaks[2];
            });
    Map<String, long[]> perExecutor = new HashMap<>();
    for (String reply : replies) {
      String[] parts = reply.split(",");
      perExecutor.put(
          parts[0],
          new long[] {
            Long.parseLong(parts[1]), Long.parseLong(parts[2]), Long.parseLong(parts[3])
          });
    }
    return new ArrayList<>(perExecutor.values());
  }
}
