package io.npugather.bench;

import io.npugather.spark.AllGatherOptions;
import io.npugather.spark.NpuGather;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;

/**
 * {@code allGatherOnNpu} with backend {@code host}; every output partition is read as Spark reads
 * it downstream (its columnar batches turned into rows), the id after the source rank.
 */
final class NpuMethod implements GatherMethod {
  @Override
  public String name() {
    return "npu";
  }

  @Override
  public Outcome run(BenchInput input) {
    Dataset<Row> gathered =
        NpuGather.allGatherOnNpu(input.data(), Map.of(AllGatherOptions.BACKEND, "host"));
    Shape shape = input.shape();
    List<long[]> digests =
        gathered
            .queryExecution()
            .toRdd()
            .toJavaRDD()
            .mapPartitionsWithIndex(
                (partition, rows) ->
                    List.of(GatherMethod.digest(partition, rows, shape, 1)).iterator(),
                false)
            .collect();
    return Outcome.of(digests);
  }
}
