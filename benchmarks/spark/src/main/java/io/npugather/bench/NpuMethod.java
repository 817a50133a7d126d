package io.npugather.bench;

import io.npugather.spark.AllGatherOptions;
import io.npugather.spark.GatherMetrics;
import io.npugather.spark.NpuGather;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;

/**
 * {@code allGatherOnNpu} with backend {@code host}; every output partition is read as Spark reads
 * it downstream (its columnar batches turned into rows), the id after the source rank. {@code npu}:
 * one output per executor, as by default; {@code npu-per-rank}: a copy per rank ({@code
 * spark.npugather.output.onePerExecutor=false}).
 */
final class NpuMethod implements GatherMethod {
  private static final String ONE_PER_EXECUTOR = "spark.npugather.output.onePerExecutor";

  private final boolean onePerExecutor;

  NpuMethod(boolean onePerExecutor) {
    this.onePerExecutor = onePerExecutor;
  }

  @Override
  public String name() {
    return onePerExecutor ? "npu" : "npu-per-rank";
  }

  @Override
  public Outcome run(BenchInput input) {
    var conf = input.data().sparkSession().conf();
    conf.set(ONE_PER_EXECUTOR, Boolean.toString(onePerExecutor));
    try {
      return gather(input);
    } finally {
      conf.unset(ONE_PER_EXECUTOR);
    }
  }

  private static Outcome gather(BenchInput input) {
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
    return Outcome.of(digests, GatherMetrics.of(gathered));
  }
}
