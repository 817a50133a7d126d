package io.npugather.spark;

import java.io.Serializable;
import org.apache.spark.SparkContext;
import org.apache.spark.util.LongAccumulator;

/**
 * Per-run figures, summed over the ranks as Spark accumulators (visible in the Spark UI under
 * the stage, and to the caller through {@link NpuGather#lastMetrics}).
 */
public final class GatherMetrics implements Serializable {
  private static final long serialVersionUID = 1L;

  private final LongAccumulator bytesSent;
  private final LongAccumulator bytesReceived;
  private final LongAccumulator rowsGathered;
  private final LongAccumulator conversionNanos;
  private final LongAccumulator rendezvousNanos;
  private final LongAccumulator collectiveNanos;
  private final LongAccumulator ownPartitionBytes;
  private final LongAccumulator peakOffHeapBytes;
  private volatile String input = "";

  GatherMetrics(SparkContext sc) {
    bytesSent = sc.longAccumulator("npugather.bytesSent");
    bytesReceived = sc.longAccumulator("npugather.bytesReceived");
    rowsGathered = sc.longAccumulator("npugather.rowsGathered");
    conversionNanos = sc.longAccumulator("npugather.conversionNanos");
    rendezvousNanos = sc.longAccumulator("npugather.rendezvousNanos");
    collectiveNanos = sc.longAccumulator("npugather.collectiveNanos");
    ownPartitionBytes = sc.longAccumulator("npugather.ownPartitionBytes");
    peakOffHeapBytes = sc.longAccumulator("npugather.peakOffHeapBytes");
  }

  void recordInput(String input) {
    this.input = input;
  }

  /**
   * What the ranks converted: "cached batches" (Spark's cached bytes), "columnar batches" or
   * "rows"; empty for runs without a DataFrame input.
   */
  public String input() {
    return input;
  }

  void addMemory(long ownPartition, long peakOffHeap) {
    ownPartitionBytes.add(ownPartition);
    peakOffHeapBytes.add(peakOffHeap);
  }

  /** Off-heap bytes of the ranks' own Arrow partitions, summed over ranks. */
  public long ownPartitionBytes() {
    return ownPartitionBytes.value();
  }

  /** Peak off-heap bytes of each rank's task allocator, summed over ranks. */
  public long peakOffHeapBytes() {
    return peakOffHeapBytes.value();
  }

  void addTask(long sent, long received, long rows, long conversion, long rendezvous,
      long collective) {
    bytesSent.add(sent);
    bytesReceived.add(received);
    rowsGathered.add(rows);
    conversionNanos.add(conversion);
    rendezvousNanos.add(rendezvous);
    collectiveNanos.add(collective);
  }

  /** Bytes all ranks sent from their own partitions (each rank's block counts once per peer). */
  public long bytesSent() {
    return bytesSent.value();
  }

  /** Bytes all ranks received from their peers. */
  public long bytesReceived() {
    return bytesReceived.value();
  }

  /** Rows in the output, summed over ranks. */
  public long rowsGathered() {
    return rowsGathered.value();
  }

  /** Time converting rows to Arrow, summed over ranks. */
  public long conversionNanos() {
    return conversionNanos.value();
  }

  /** Time in the rendezvous round, summed over ranks. */
  public long rendezvousNanos() {
    return rendezvousNanos.value();
  }

  /** Time creating the communicator and moving the data, summed over ranks. */
  public long collectiveNanos() {
    return collectiveNanos.value();
  }

  @Override
  public String toString() {
    return String.format("%ssent %d B, received %d B, %d rows; conversion %.1f ms, rendezvous %.1f"
        + " ms, collective %.1f ms; own partitions %d B, peak off-heap %d B (summed over ranks)",
        input.isEmpty() ? "" : input + " input; ", bytesSent(), bytesReceived(), rowsGathered(), conversionNanos() / 1e6,
        rendezvousNanos() / 1e6, collectiveNanos() / 1e6, ownPartitionBytes(), peakOffHeapBytes());
  }
}
