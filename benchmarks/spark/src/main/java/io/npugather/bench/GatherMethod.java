package io.npugather.bench;

import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import org.apache.spark.sql.catalyst.InternalRow;

/**
 * One way to give every rank all partitions. {@link #run} is timed end to end on the driver: it
 * starts from the cached input and returns once every output partition has been read in full (its
 * rows reduced to a checksum) on the executors.
 */
interface GatherMethod {
  /** The names {@code --methods} accepts, in the table's order. */
  List<String> NAMES =
      List.of("npu", "npu-per-rank", "broadcast", "barrier-strings", "shuffle", "floor");

  String name();

  /**
   * The rows each output partition should hold: {@code ranks * rowsPerPartition} for a gather,
   * {@code rowsPerPartition} for the floor, which reads its own partition only.
   */
  default long expectedRows(BenchInput input) {
    return input.ranks() * input.rowsPerPartition();
  }

  Outcome run(BenchInput input) throws Exception;

  static GatherMethod named(String name) {
    switch (name.trim().toLowerCase(Locale.ROOT)) {
      case "npu":
        return new NpuMethod(true);
      case "npu-per-rank":
        return new NpuMethod(false);
      case "broadcast":
        return new BroadcastMethod();
      case "barrier-strings":
        return new BarrierStringsMethod();
      case "shuffle":
        return new ShuffleMethod();
      case "floor":
        return new FloorMethod();
      default:
        throw new IllegalArgumentException(
            "--methods: unknown method '" + name + "'; allowed: " + String.join(", ", NAMES));
    }
  }

  /** The digest of internal rows whose id is at {@code idOrdinal}, with the time reading them. */
  static long[] digest(int partition, Iterator<InternalRow> rows, Shape shape, int idOrdinal) {
    long start = System.nanoTime();
    long count = 0;
    long checksum = 0;
    while (rows.hasNext()) {
      checksum += shape.hash(rows.next(), idOrdinal);
      count++;
    }
    return Outcome.digest(partition, count, checksum, System.nanoTime() - start);
  }
}
