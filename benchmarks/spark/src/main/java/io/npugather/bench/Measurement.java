package io.npugather.bench;

import io.npugather.spark.GatherMetrics;
import java.util.ArrayList;
import java.util.List;

/** The measured runs of one method on one configuration. */
final class Measurement {
  final String master;
  final int ranks;

  /** Ranks in one executor JVM: all of them in local mode. */
  final int ranksPerExecutor;

  final Shape shape;
  final long partitionBytes;
  final String method;

  /** Bytes each rank ends up holding: all partitions, or its own for the floor. */
  final long bytesPerRank;

  final List<Long> nanos = new ArrayList<>();

  /** Per run: the slowest output partition's time reading its rows, inside its task. */
  final List<Long> readNanos = new ArrayList<>();

  /** Per run, for a gather: its phases per rank (the plan node's sums over ranks / ranks). */
  final List<Long> conversionNanos = new ArrayList<>();

  final List<Long> rendezvousNanos = new ArrayList<>();
  final List<Long> collectiveNanos = new ArrayList<>();

  /** Per run, for a gather: the bytes each executor received from other executors. */
  final List<Long> receivedPerExecutor = new ArrayList<>();

  long heapPeak;
  long heapAfterGcPeak;
  long offHeapPeak;
  long driverHeapPeak;
  final List<String> problems = new ArrayList<>();

  Measurement(
      String master,
      int ranks,
      int ranksPerExecutor,
      Shape shape,
      long partitionBytes,
      String method,
      long bytesPerRank) {
    this.master = master;
    this.ranks = ranks;
    this.ranksPerExecutor = ranksPerExecutor;
    this.shape = shape;
    this.partitionBytes = partitionBytes;
    this.method = method;
    this.bytesPerRank = bytesPerRank;
  }

  void addMemory(long heap, long heapAfterGc, long offHeap, long driverHeap) {
    heapPeak = Math.max(heapPeak, heap);
    heapAfterGcPeak = Math.max(heapAfterGcPeak, heapAfterGc);
    offHeapPeak = Math.max(offHeapPeak, offHeap);
    driverHeapPeak = Math.max(driverHeapPeak, driverHeap);
  }

  void addMemory(MemoryProbes.Peaks peaks) {
    addMemory(peaks.highest(0), peaks.highest(1), peaks.highest(2), peaks.driverHeap());
  }

  /** What one measured run took and, for a gather, its phases. */
  void addRun(long runNanos, Outcome outcome) {
    nanos.add(runNanos);
    readNanos.add(outcome.slowestReadNanos());
    GatherMetrics metrics = outcome.metrics();
    if (metrics != null) {
      conversionNanos.add(metrics.conversionNanos() / ranks);
      rendezvousNanos.add(metrics.rendezvousNanos() / ranks);
      collectiveNanos.add(metrics.collectiveNanos() / ranks);
      receivedPerExecutor.add(metrics.bytesReceived() / (ranks / ranksPerExecutor));
    }
  }

  long median() {
    return median(nanos);
  }

  static long median(List<Long> values) {
    List<Long> sorted = new ArrayList<>(values);
    sorted.sort(null);
    int n = sorted.size();
    return n % 2 == 1 ? sorted.get(n / 2) : (sorted.get(n / 2 - 1) + sorted.get(n / 2)) / 2;
  }

  long min() {
    return nanos.stream().mapToLong(Long::longValue).min().orElse(0);
  }

  long max() {
    return nanos.stream().mapToLong(Long::longValue).max().orElse(0);
  }

  boolean verified() {
    return problems.isEmpty();
  }
}
