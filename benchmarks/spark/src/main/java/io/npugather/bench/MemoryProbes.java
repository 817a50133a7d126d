package io.npugather.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;

/**
 * Resets and reads the {@link MemoryProbe} of every executor JVM and of the driver. A barrier stage
 * of one task per rank reaches every executor: barrier mode needs all tasks running at once, and
 * the executors' task slots add up to the ranks, so every executor JVM runs as many tasks as it has
 * ranks. The executors that answer are checked against those the driver knows.
 */
final class MemoryProbes {
  private MemoryProbes() {}

  /**
   * One run's peaks, in bytes: per executor JVM (by executor id) {used heap, heap after GC,
   * off-heap}, and the driver's used heap.
   */
  record Peaks(Map<String, long[]> perExecutor, long driverHeap) {
    /** The highest executor's peak of kind {@code i} (0 heap, 1 heap after GC, 2 off-heap). */
    long highest(int i) {
      return perExecutor.values().stream().mapToLong(p -> p[i]).max().orElse(0);
    }
  }

  static void reset(BenchInput input) {
    onEveryExecutor(input, true);
    MemoryProbe.get().reset();
  }

  static Peaks read(BenchInput input) {
    long driverHeap = MemoryProbe.get().peaks()[0];
    return new Peaks(onEveryExecutor(input, false), driverHeap);
  }

  /** Per executor JVM: {@link MemoryProbe#peaks} (reading) or zeros (resetting). */
  private static Map<String, long[]> onEveryExecutor(BenchInput input, boolean reset) {
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
    Map<String, long[]> perExecutor = new TreeMap<>();
    for (String reply : replies) {
      String[] parts = reply.split(",");
      perExecutor.put(
          parts[0],
          new long[] {
            Long.parseLong(parts[1]), Long.parseLong(parts[2]), Long.parseLong(parts[3])
          });
    }
    int executors = executorJvms(input.spark().sparkContext());
    if (perExecutor.size() != executors) {
      throw new IllegalStateException(
          "the memory probes reached executors "
              + perExecutor.keySet()
              + ", "
              + perExecutor.size()
              + " of the "
              + executors
              + " executor JVMs");
    }
    return perExecutor;
  }

  /** Executor JVMs of the application; in local mode the driver JVM is the one executor. */
  private static int executorJvms(SparkContext sc) {
    return Math.max(1, sc.statusTracker().getExecutorInfos().length - 1);
  }
}
