package io.npugather.spark;

import io.npugather.spark.arrow.GatheredPartitions;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@code allGatherOnNpu}: every partition of a DataFrame, on every rank.
 *
 * <p>A barrier stage runs one task per partition (rank = partition id, rankSize = number of
 * partitions). The result has one partition per rank; partition r holds every input row, ordered
 * by source rank and then by the original order within each source partition, after an {@code
 * int} column naming the source rank ({@code source_rank} unless configured). Works with {@code
 * df.transform(NpuGather::allGatherOnNpu)}; from Scala, {@code import
 * io.npugather.spark.implicits._} gives {@code df.allGatherOnNpu()}.
 */
public final class NpuGather {
  private static final AtomicReference<GatherMetrics> LAST_RUN = new AtomicReference<>();

  private NpuGather() {}

  /** With the session's defaults ({@code spark.npugather.*} conf entries). */
  public static Dataset<Row> allGatherOnNpu(Dataset<Row> df) {
    Objects.requireNonNull(df, "df");
    return allGatherOnNpu(df, AllGatherOptions.fromConf(
        CollectionConverters.asJava(df.sparkSession().conf().getAll())));
  }

  /** With options given as {@code npugather.*} keys over the session's defaults. */
  public static Dataset<Row> allGatherOnNpu(Dataset<Row> df, Map<String, String> options) {
    Objects.requireNonNull(df, "df");
    Objects.requireNonNull(options, "options");
    return allGatherOnNpu(df, AllGatherOptions.fromConf(
        CollectionConverters.asJava(df.sparkSession().conf().getAll())).with(options));
  }

  /**
   * With explicit options. When {@code options.rankSize()} is set and differs from the number of
   * partitions, the input is repartitioned (round-robin) to that many partitions first; the
   * order within a source rank is then the repartitioned order.
   */
  public static Dataset<Row> allGatherOnNpu(Dataset<Row> df, AllGatherOptions options) {
    Objects.requireNonNull(df, "df");
    Objects.requireNonNull(options, "options");
    // Fails early, naming the column, when the source-rank column collides with an input column.
    GatheredPartitions.outputSchema(df.schema(), options.sourceRankColumn());
    Dataset<Row> input = df;
    if (options.rankSize() > 0 && options.rankSize() != df.rdd().getNumPartitions()) {
      input = df.repartition(options.rankSize());
    }
    org.apache.spark.sql.classic.Dataset<Row> classic =
        (org.apache.spark.sql.classic.Dataset<Row>) input;
    NpuGatherPlanning.install(classic.sparkSession());
    return org.apache.spark.sql.classic.Dataset$.MODULE$.ofRows(classic.sparkSession(),
        NpuGatherPlanning.node(classic.logicalPlan(), options));
  }

  /** The figures of the most recent run planned in this driver, or null before the first. */
  public static GatherMetrics lastMetrics() {
    return LAST_RUN.get();
  }

  static void recordRun(GatherMetrics metrics) {
    LAST_RUN.set(metrics);
  }
}
