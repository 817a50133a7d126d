package io.npugather.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.CommunicatorOptions.HostTransport;
import io.npugather.spark.AllGatherOptions;
import io.npugather.spark.NpuGather;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * allGatherOnNpu with backend host between two executor JVMs of a standalone cluster: over
 * shared memory (the transport chosen for processes on one host) and over TCP (forced).
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class AllGatherAcrossExecutorJvmsTest {
  private static SparkCluster cluster;
  private static SparkSession spark;
  private static int gathers;

  @BeforeAll
  static void startCluster() {
    cluster = SparkCluster.start("AllGatherAcrossExecutorJvmsTest", 2, Map.of());
    spark = cluster.spark();
  }

  @AfterAll
  static void stopCluster() {
    if (cluster != null) {
      cluster.close();
    }
  }

  @Test
  @Order(1)
  void everyPartitionHoldsEveryRowInRankOrderAcrossExecutorJvmsOverSharedMemory() {
    cluster.explainFailure(() -> gatherMixedRowsOnTwoExecutors(Map.of(), 11));
  }

  @Test
  @Order(2)
  void everyPartitionHoldsEveryRowInRankOrderAcrossExecutorJvmsOverTcp() {
    cluster.explainFailure(() -> gatherMixedRowsOnTwoExecutors(
        Map.of(AllGatherOptions.HOST_TRANSPORT, "tcp"), 12));
  }

  @Test
  @Order(3)
  void executorJvmsOnOneHostExchangeByCrossMemoryAttachOrByTcpWhenForced() {
    cluster.explainFailure(() -> {
      List<String> shared = TransportProbe.run(spark.sparkContext(), 2, HostTransport.AUTO);
      gathers++;
      assertProbe(shared, "cma");
      assertProbe(TransportProbe.run(spark.sparkContext(), 2, HostTransport.TCP), "tcp");
    });
  }

  @Test
  @Order(4)
  void noSharedMemoryObjectOfTheRunIsLeftBehind() {
    cluster.explainFailure(() -> {
      assertTrue(gathers >= 1, "no gather ran before this check");
      // Tasks release their resources when they complete, which may trail the job's end.
      SparkCluster.waitUntil(Duration.ofSeconds(10),
          () -> GatherChecks.sharedMemoryObjects(cluster).isEmpty());
      assertEquals(List.of(), GatherChecks.sharedMemoryObjects(cluster),
          "/dev/shm objects with suffix " + cluster.sharedMemorySuffix());
    });
  }

  /** Lines "rank transport pid wrongValues" from two different executor JVMs. */
  private static void assertProbe(List<String> lines, String transport) {
    assertEquals(2, lines.size(), lines.toString());
    String[] rank0 = lines.get(0).split(" ");
    String[] rank1 = lines.get(1).split(" ");
    assertEquals(List.of("0", transport, "0"), List.of(rank0[0], rank0[1], rank0[3]),
        "rank 0: " + lines);
    assertEquals(List.of("1", transport, "0"), List.of(rank1[0], rank1[1], rank1[3]),
        "rank 1: " + lines);
    assertNotEquals(rank0[2], rank1[2], "both ranks in one process: " + lines);
    List<String> executorPids = cluster.executorPids().stream().map(String::valueOf).toList();
    assertTrue(executorPids.contains(rank0[2]) && executorPids.contains(rank1[2]),
        "ranks not in executor JVMs " + executorPids + ": " + lines);
  }

  /** 2 ranks on 2 executors; every output partition checked row by row. */
  private static void gatherMixedRowsOnTwoExecutors(Map<String, String> options, long seed) {
    assertEquals(2, cluster.executorPids().size(), "executor JVMs: " + cluster.executorPids());
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    Dataset<Row> df = spark.createDataFrame(
        jsc.parallelize(GatherChecks.mixedRows(12_000, seed), 2), GatherChecks.MIXED);
    List<List<Row>> in = GatherChecks.partitions(df);
    assertEquals(2, in.size());
    Map<Path, Integer> offsets = GatherChecks.logOffsets(cluster);

    List<List<Row>> out = GatherChecks.partitions(NpuGather.allGatherOnNpu(df, options));
    gathers++;

    GatherChecks.assertRankMajorOnEveryPartition(in, out);
    // Each rank ran in its own executor JVM.
    Map<Integer, List<Path>> ranks = GatherChecks.ranksByExecutor(cluster, offsets);
    assertEquals(List.of(0, 1), List.copyOf(ranks.keySet()), "ranks logged: " + ranks);
    assertEquals(1, ranks.get(0).size(), "rank 0 gathered once: " + ranks);
    assertEquals(1, ranks.get(1).size(), "rank 1 gathered once: " + ranks);
    assertNotEquals(ranks.get(0).get(0), ranks.get(1).get(0), "ranks in one executor: " + ranks);
  }
}
