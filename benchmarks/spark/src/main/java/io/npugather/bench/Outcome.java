package io.npugather.bench;

import io.npugather.spark.GatherMetrics;
import java.util.List;

/**
 * What one run of a method delivered: a digest {partition, rows, checksum, nanos reading} per
 * output partition; for methods that time themselves inside the tasks, the slowest task's time; for
 * a gather, its plan node's figures (null otherwise).
 */
record Outcome(List<long[]> digests, long innerNanos, GatherMetrics metrics) {
  static Outcome of(List<long[]> digests) {
    return new Outcome(digests, -1, null);
  }

  static Outcome of(List<long[]> digests, GatherMetrics metrics) {
    return new Outcome(digests, -1, metrics);
  }

  static long[] digest(int partition, long rows, long checksum) {
    return digest(partition, rows, checksum, 0);
  }

  static long[] digest(int partition, long rows, long checksum, long nanos) {
    return new long[] {partition, rows, checksum, nanos};
  }

  /** The slowest partition's time reading its rows (the digests' last field). */
  long slowestReadNanos() {
    return digests.stream().mapToLong(d -> d.length > 3 ? d[3] : 0).max().orElse(0);
  }
}
