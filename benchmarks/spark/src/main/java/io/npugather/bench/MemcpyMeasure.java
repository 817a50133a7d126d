package io.npugather.bench;

import java.util.ArrayList;
import java.util.List;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.spark.sql.util.ArrowUtils;

/**
 * The time to write the gathered bytes once: in one barrier stage (all ranks at once, as in a
 * gather), every task copies a partition-sized off-heap buffer {@code ranks} times into a buffer
 * already touched, and times that copy alone. The slowest task's time counts; the destination's
 * bytes are checked against the source.
 *
 * <p>The destination holds the gathered size up to {@link #MAX_DESTINATION_BYTES} (at least one
 * partition) and is written in turn: far beyond any cache, so the rate is memory's, while 8 ranks
 * of 64 MiB in one executor JVM need not hold 8 gathered tables beside the gather's own.
 */
final class MemcpyMeasure {
  static final long MAX_DESTINATION_BYTES = 128L << 20;

  private MemcpyMeasure() {}

  static Outcome run(BenchInput input) {
    long blockBytes = input.partitionBytes();
    int ranks = input.ranks();
    List<Integer> slots = new ArrayList<>();
    for (int r = 0; r < ranks; r++) {
      slots.add(r);
    }
    List<long[]> timings =
        Barrier.collect(
            input.jsc().parallelize(slots, ranks).rdd(),
            long[].class,
            (partition, ignored) -> copyTimed(partition, blockBytes, ranks));
    long slowest = 0;
    for (long[] t : timings) {
      slowest = Math.max(slowest, t[1]);
    }
    return new Outcome(List.of(), slowest, null);
  }

  /** Partition-sized places in the destination. */
  static int slots(long blockBytes, int ranks) {
    return (int) Math.max(1, Math.min(ranks, MAX_DESTINATION_BYTES / blockBytes));
  }

  /** {partition, nanoseconds}. */
  private static long[] copyTimed(int partition, long blockBytes, int ranks) {
    try (BufferAllocator allocator =
            ArrowUtils.rootAllocator()
                .newChildAllocator("npugather-bench-memcpy-" + partition, 0, Long.MAX_VALUE);
        ArrowBuf source = allocator.buffer(blockBytes);
        ArrowBuf gathered = allocator.buffer(blockBytes * slots(blockBytes, ranks))) {
      int slots = slots(blockBytes, ranks);
      for (long i = 0; i + 8 <= blockBytes; i += 8) {
        source.setLong(i, i * 0x9E3779B97F4A7C15L + partition);
      }
      gathered.setZero(0, gathered.capacity());
      long start = System.nanoTime();
      for (int r = 0; r < ranks; r++) {
        gathered.setBytes((r % slots) * blockBytes, source, 0, blockBytes);
      }
      long nanos = System.nanoTime() - start;
      for (int r = 0; r < slots; r++) {
        for (long i = 0; i + 8 <= blockBytes; i += 8 * 4096) {
          if (gathered.getLong(r * blockBytes + i) != source.getLong(i)) {
            throw new IllegalStateException("memcpy measure: block " + r + " differs at " + i);
          }
        }
      }
      return new long[] {partition, nanos};
    }
  }
}
