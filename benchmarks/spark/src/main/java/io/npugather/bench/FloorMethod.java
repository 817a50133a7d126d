package io.npugather.bench;

import java.util.List;

/** One pass over each cached partition, nothing moved: what no gather can beat. */
final class FloorMethod implements GatherMethod {
  @Override
  public String name() {
    return "floor";
  }

  @Override
  public long expectedRows(BenchInput input) {
    return input.rowsPerPartition();
  }

  @Override
  public Outcome run(BenchInput input) {
    return Outcome.of(scan(input));
  }

  /** The digest of every input partition. */
  static List<long[]> scan(BenchInput input) {
    Shape shape = input.shape();
    return input
        .data()
        .queryExecution()
        .toRdd()
        .toJavaRDD()
        .mapPartitionsWithIndex(
            (partition, rows) -> List.of(GatherMethod.digest(partition, rows, shape, 0)).iterator(),
            false)
        .collect();
  }
}
