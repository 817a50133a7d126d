package io.npugather.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.CommunicatorOptions.HostTransport;
import io.npugather.spark.AllGatherOptions;
import io.npugather.spark.NpuGather;
import io.npugather.spark.memory.GatherMemory;
import io.npugather.spark.testing.RankMajor;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.functions;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * allGatherOnNpu with backend host between two executor JVMs of a standalone cluster: over shared
 * memory (the transport chosen for processes on one host) and over TCP (forced); each executor
 * reuses its large buffers within the limit the application's conf sets.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class AllGatherAcrossExecutorJvmsTest {
  /** Closed after the class's last test, whatever happened. */
  @AutoClose private static SparkCluster cluster;

  private static int gathers;
  private static final long CACHE_LIMIT_MIB = 96;

  @BeforeAll
  static void startCluster() {
    cluster =
        SparkCluster.start(
            "AllGatherAcrossExecutorJvmsTest",
            2,
            Map.of(GatherMemory.CACHE_BYTES, CACHE_LIMIT_MIB + "m"));
  }

  @Test
  @Order(1)
  void everyPartitionHoldsEveryRowInRankOrderAcrossExecutorJvmsOverSharedMemory() {
    cluster.explainFailure(
        () -> {
          GatherChecks.gatherMixedRows(cluster, 2, Map.of(), 11, "cma");
          gathers++;
        });
  }

  @Test
  @Order(2)
  void everyPartitionHoldsEveryRowInRankOrderAcrossExecutorJvmsOverTcp() {
    cluster.explainFailure(
        () -> {
          GatherChecks.gatherMixedRows(
              cluster, 2, Map.of(AllGatherOptions.HOST_TRANSPORT, "tcp"), 12, "tcp");
          gathers++;
        });
  }

  @Test
  @Order(3)
  void executorJvmsOnOneHostExchangeByCrossMemoryAttachOrByTcpWhenForced() {
    cluster.explainFailure(
        () -> {
          TransportProbe.check(cluster, 2, HostTransport.AUTO, "cma");
          gathers++;
          TransportProbe.check(cluster, 2, HostTransport.TCP, "tcp");
        });
  }

  @Test
  @Order(4)
  void aRepeatedGatherReusesLargeBuffersInEveryExecutorWithinTheConfiguredLimit() {
    cluster.explainFailure(
        () -> {
          // Per rank 300,000 rows of two bigint columns: 4 MiB Arrow buffers and a 4.6 MiB receive
          // buffer. The second gather gets the first one's memory back, holding other values.
          SparkSession spark = cluster.spark();
          NpuGather.allGatherOnNpu(
                  spark.range(0, 600_000, 1, 2).selectExpr("id", "xxhash64(id, 1) as h"))
              .selectExpr("max(h)")
              .collect();
          long reusedBefore =
              ExecutorLeakProbe.awaitReleased(cluster, 2).stream()
                  .mapToLong(ExecutorLeakProbe.Figures::cacheReused)
                  .sum();
          Dataset<Row> input =
              spark.range(0, 600_000, 1, 2).selectExpr("id * 5 as id", "xxhash64(id, 2) as h");
          Row expected =
              input
                  .selectExpr("spark_partition_id() as source_rank", "id", "h")
                  .selectExpr("count(*)", "sum(hash(source_rank, id, h))")
                  .first();
          List<Row> perPartition =
              NpuGather.allGatherOnNpu(input)
                  .selectExpr("spark_partition_id() as p", "hash(source_rank, id, h) as x")
                  .groupBy("p")
                  .agg(functions.count("x"), functions.sum("x"))
                  .orderBy("p")
                  .collectAsList();
          assertEquals(
              List.of(
                  RowFactory.create(0, expected.get(0), expected.get(1)),
                  RowFactory.create(1, expected.get(0), expected.get(1))),
              perPartition);

          List<ExecutorLeakProbe.Figures> figures = ExecutorLeakProbe.run(cluster, 2);
          for (ExecutorLeakProbe.Figures f : figures) {
            assertEquals(
                CACHE_LIMIT_MIB << 20, f.cacheLimit(), "the application's conf: " + figures);
            assertTrue(f.cacheIdleBytes() <= f.cacheLimit(), figures.toString());
          }
          long reused = figures.stream().mapToLong(ExecutorLeakProbe.Figures::cacheReused).sum();
          assertTrue(reused >= reusedBefore + 2, "at least one reuse per rank: " + figures);
          gathers++;
        });
  }

  @Test
  @Order(5)
  void theGatheredDataFrameAnswersEveryActionAgainAcrossExecutorJvms() {
    cluster.explainFailure(
        () -> {
          SparkSession spark = cluster.spark();
          Dataset<Row> input = GatherChecks.mixedInput(spark, 4_000, 21, 2);
          List<List<Row>> in = RankMajor.partitions(input);
          List<Row> rankMajor = RankMajor.rows(in);
          Dataset<Row> g = NpuGather.allGatherOnNpu(input);
          // Re-execution: the same DataFrame and its RDD, several jobs, one after another.
          RankMajor.assertOnEveryPartition(in, RankMajor.partitions(g));
          RankMajor.assertOnEveryPartition(in, RankMajor.partitions(g));
          assertEquals(2L * rankMajor.size(), g.javaRDD().count());
          assertEquals(rankMajor.subList(0, 3), List.of((Row[]) g.take(3)));
          // coalesce(1): one task reads both partitions, wherever it runs.
          List<Row> twice = new ArrayList<>(rankMajor);
          twice.addAll(rankMajor);
          assertEquals(twice, g.coalesce(1).collectAsList());
          // Unions: with itself, and with another gather that needs the cluster's two slots too.
          assertEquals(4L * rankMajor.size(), g.union(g).count());
          Dataset<Row> other =
              NpuGather.allGatherOnNpu(
                  spark.range(0, 500, 1, 2).toDF().selectExpr("CAST(id AS INT) AS i"));
          assertEquals(
              2L * rankMajor.size() + 1000L,
              g.select("source_rank").union(other.select("source_rank")).count());
          gathers += 6;
        });
  }

  @Test
  @Order(6)
  void noSharedMemoryArrowMemoryOrCommunicatorIsLeftBehind() {
    cluster.explainFailure(
        () -> {
          assertTrue(gathers >= 1, "no gather ran before this check");
          GatherChecks.assertNothingLeftBehind(cluster);
        });
  }
}
