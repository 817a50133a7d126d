package io.npugather.spark;

import io.npugather.spark.connect.ConnectDataFrames;
import io.npugather.spark.memory.GatherMemory;
import java.util.List;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The driver side of {@link NpuGather}'s DataFrame calls on a classic session: the plans of a
 * gather and of a join's build side gathered onto the executors, with the call's checks, once; and
 * what a planned gather gives back (its batches, its figures).
 */
final class GatherPlans {
  private GatherPlans() {}

  /** What {@link NpuGather#allGatherOnNpu(Dataset, AllGatherOptions)} describes. */
  static Dataset<Row> allGatherOnNpu(Dataset<Row> df, AllGatherOptions options) {
    if (ConnectDataFrames.isConnect(df)) {
      throw new IllegalArgumentException(
          "on a Spark Connect DataFrame, allGatherOnNpu takes its options as a map of npugather.*"
              + " keys, over the server session's defaults; got AllGatherOptions");
    }
    org.apache.spark.sql.classic.Dataset<Row> input = classic(df, "allGatherOnNpu");
    // Fails early, naming the column, before the input is planned.
    NpuAllGather.requireFreeName(options.sourceRankColumn(), input.logicalPlan().output());
    SparkSession session = input.sparkSession();
    GatherMemory.checkConf(session.sparkContext().getConf());
    requireRootAmongRanks(options, input);
    if (options.rankSize() > 0 && options.rankSize() != input.rdd().getNumPartitions()) {
      input = input.repartition(options.rankSize());
    }
    NpuGatherPlanning.install(session);
    return ofRows(
        session, NpuGatherPlanning.node(input.logicalPlan(), options, session.sparkContext()));
  }

  /** What {@link NpuGather#broadcastOnExecutors} describes. */
  static Dataset<Row> broadcastOnExecutors(Dataset<Row> df) {
    org.apache.spark.sql.classic.Dataset<Row> input = classic(df, "broadcastOnExecutors");
    SparkSession session = input.sparkSession();
    NpuGatherPlanning.install(session);
    return ofRows(
        session,
        AllGatherJoinHint.over(
            input.logicalPlan(), session.sparkContext(), /* automatic= */ false));
  }

  /** What {@link NpuGather#gatheredBatches} describes. */
  static JavaRDD<ColumnarBatch> gatheredBatches(Dataset<Row> gathered) {
    QueryExecution execution = classic(gathered, "gatheredBatches").queryExecution();
    if (!(execution.optimizedPlan() instanceof NpuAllGather)) {
      throw new IllegalArgumentException(
          "gathered must be the result of allGatherOnNpu itself, with no operation after it; its"
              + " plan is "
              + execution.optimizedPlan().nodeName());
    }
    return execution.executedPlan().executeColumnar().toJavaRDD();
  }

  /** What {@link GatherMetrics#of} describes. */
  static GatherMetrics metricsOf(Dataset<?> gathered) {
    LogicalPlan plan = classic(gathered, "GatherMetrics.of").logicalPlan();
    List<GatherMetrics> found = CollectionConverters.asJava(NpuAllGather.metricsIn(plan));
    if (found.size() == 1) {
      return found.get(0);
    }
    throw new IllegalArgumentException(
        found.isEmpty()
            ? "gathered holds no gather; pass what allGatherOnNpu or broadcastOnExecutors returned,"
                + " or a DataFrame made from it"
            : "gathered holds " + found.size() + " gathers; pass the DataFrame of each");
  }

  /** rankRoot against the ranks of the run, at the call: {@code rankSize}, else the partitions. */
  static void requireRootAmongRanks(AllGatherOptions options, Dataset<Row> input) {
    if (options.rankRoot() > 0) {
      options.requireRootAmong(
          options.rankSize() > 0 ? options.rankSize() : input.rdd().getNumPartitions());
    }
  }

  /** {@code df} as the classic API's Dataset; a DataFrame of Spark Connect's client is refused. */
  static <T> org.apache.spark.sql.classic.Dataset<T> classic(Dataset<T> df, String operation) {
    if (df instanceof org.apache.spark.sql.classic.Dataset<T> classic) {
      return classic;
    }
    throw new IllegalArgumentException(
        operation
            + " needs a DataFrame of a classic Spark session; got a "
            + df.getClass().getName());
  }

  private static Dataset<Row> ofRows(SparkSession session, LogicalPlan plan) {
    return org.apache.spark.sql.classic.Dataset$.MODULE$.ofRows(session, plan);
  }
}
