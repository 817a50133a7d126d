package io.npugather.bench;

import java.util.List;

/**
 * What one run of a method delivered: a digest {partition, rows, checksum} per output partition,
 * and, for methods that time themselves inside the tasks, the slowest task's time.
 */
record Outcome(List<long[]> digests, long innerNanos) {
  static Outcome of(List<long[]> digests) {
    return new Outcome(digests, -1);
  }

  static long[] digest(int partition, long rows, long checksum) {
    return new long[] {partition, rows, checksum};
  }
}
