package io.npugather.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.spark.GatherMetrics;
import io.npugather.spark.NpuGather;
import io.npugather.spark.testing.RankMajor;
import io.npugather.spark.testing.ReaderMemory;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * Two ranks in each of two executor JVMs: the ranks of an executor gather one output together (one
 * of them exchanges with the other executor's), so every executor holds the gathered table once,
 * and every rank's partition still holds every row in rank order.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class RanksSharingExecutorJvmsTest {
  @AutoClose private static SparkCluster cluster;

  @BeforeAll
  static void startCluster() {
    cluster =
        SparkCluster.builder("RanksSharingExecutorJvmsTest")
            .executors(2)
            .coresPerExecutor(2)
            .start();
  }

  @Test
  @Order(1)
  void everyPartitionHoldsEveryRowInRankOrderWhenRanksShareExecutors() {
    cluster.explainFailure(
        () -> {
          SparkSession spark = cluster.spark();
          Dataset<Row> input = GatherChecks.mixedInput(spark, 12_000, 31, 4);
          List<List<Row>> in = RankMajor.partitions(input);
          Dataset<Row> g = NpuGather.allGatherOnNpu(input);
          RankMajor.assertOnEveryPartition(in, RankMajor.partitions(g));
          // Every rank's rows crossed between the executors' leaders over shared memory.
          assertEquals(Map.of("cma", 4L), GatherMetrics.of(g).transports());
          RankMajor.assertOnEveryPartition(in, RankMajor.partitions(g));
        });
  }

  @Test
  @Order(2)
  void everyExecutorHoldsTheGatheredTableOnce() {
    cluster.explainFailure(
        () -> {
          Dataset<Row> input =
              cluster
                  .spark()
                  .range(0, 1_200_000, 1, 4)
                  .selectExpr("id", "xxhash64(id) as h", "cast(id as double) as d");
          Dataset<Row> gathered = NpuGather.allGatherOnNpu(input);
          Map<Long, Long> shared = offHeapPerExecutor(gathered, true);
          GatherMetrics m = GatherMetrics.of(gathered);
          long table = m.inputBytes();
          long partitions = m.ownPartitionBytes(); // as allocated: vectors keep spare room
          assertEquals(2, shared.size(), "both executors read: " + shared);
          for (long bytes : shared.values()) {
            assertTrue(
                bytes >= table && bytes <= partitions + partitions / 10,
                "one per executor: " + shared + " for a table of " + table + "; " + m);
          }
          Map<Long, Long> perRank = offHeapPerExecutor(NpuGather.allGatherOnNpu(input), false);
          for (long bytes : perRank.values()) {
            assertTrue(
                bytes >= 2 * table - table / 10,
                "one per rank: " + perRank + " for a table of " + table);
          }
        });
  }

  @Test
  @Order(3)
  void aJoinBuildsItsAllGatherSideOnEveryExecutorAndAnswersAsSpark() {
    cluster.explainFailure(
        () -> {
          SparkSession spark = cluster.spark();
          Dataset<Row> stream =
              spark
                  .range(0, 20_000, 1, 4)
                  .selectExpr(
                      "IF(id % 19 = 0, NULL, CAST(id % 997 AS INT)) AS k",
                      "id AS v",
                      "(id % 997 - 498) * 9007199254740881L AS lk",
                      "CONCAT('key ', CAST(id % 997 AS STRING)) AS sk");
          Dataset<Row> build =
              spark
                  .range(0, 3_000, 1, 3)
                  .selectExpr(
                      "IF(id % 23 = 0, NULL, CAST(id % 1200 AS INT)) AS rk",
                      "id * 2 AS w",
                      "(id % 1200 - 498) * 9007199254740881L AS rlk",
                      "IF(id % 23 = 0, NULL, CONCAT('key ', CAST(id % 1200 AS STRING))) AS rsk");
          // Keys close together (an index over their range), far apart (a hash table) and strings.
          for (String type : List.of("inner", "left_outer", "left_anti", "far apart", "string")) {
            Column on =
                switch (type) {
                  case "far apart" -> stream.col("lk").equalTo(build.col("rlk"));
                  case "string" -> stream.col("sk").equalTo(build.col("rsk"));
                  default -> stream.col("k").equalTo(build.col("rk"));
                };
            String how = type.equals("far apart") || type.equals("string") ? "inner" : type;
            Dataset<Row> joined = stream.join(NpuGather.broadcastOnExecutors(build), on, how);
            String plan =
                joined
                    .queryExecution()
                    .explainString(org.apache.spark.sql.execution.ExplainMode.fromString("simple"));
            assertTrue(plan.contains("ExecutorBuild"), plan);
            Dataset<Row> spark_ = stream.join(build, on, how);
            assertEquals(digest(spark_), digest(joined), type);
          }
        });
  }

  /** Count and an order-free sum of row hashes: equal for equal multisets of rows. */
  private static List<Object> digest(Dataset<Row> df) {
    Row r = df.selectExpr("count(*)", "sum(CAST(hash(*) AS BIGINT))").first();
    return List.of(r.get(0), r.get(1) == null ? 0L : r.get(1));
  }

  @Test
  @Order(4)
  void noSharedMemoryArrowMemoryOrCommunicatorIsLeftBehind() {
    cluster.explainFailure(() -> GatherChecks.assertNothingLeftBehind(cluster));
  }

  /** The most Arrow memory each executor (by pid) held while its tasks read the gather. */
  private static Map<Long, Long> offHeapPerExecutor(Dataset<Row> gathered, boolean onePerExecutor) {
    SparkSession spark = cluster.spark();
    spark.conf().set("spark.npugather.output.onePerExecutor", Boolean.toString(onePerExecutor));
    try {
      return ReaderMemory.byProcess(gathered);
    } finally {
      spark.conf().unset("spark.npugather.output.onePerExecutor");
    }
  }
}
