package io.npugather.it;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.CommunicatorOptions.HostTransport;
import io.npugather.spark.AllGatherOptions;
import java.util.Map;
import org.junit.jupiter.api.AutoClose;
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
  /** Closed after the class's last test, whatever happened. */
  @AutoClose
  private static SparkCluster cluster;
  private static int gathers;

  @BeforeAll
  static void startCluster() {
    cluster = SparkCluster.start("AllGatherAcrossExecutorJvmsTest", 2, Map.of());
  }

  @Test
  @Order(1)
  void everyPartitionHoldsEveryRowInRankOrderAcrossExecutorJvmsOverSharedMemory() {
    cluster.explainFailure(() -> {
      GatherChecks.gatherMixedRows(cluster, 2, Map.of(), 11, "cma");
      gathers++;
    });
  }

  @Test
  @Order(2)
  void everyPartitionHoldsEveryRowInRankOrderAcrossExecutorJvmsOverTcp() {
    cluster.explainFailure(() -> {
      GatherChecks.gatherMixedRows(cluster, 2, Map.of(AllGatherOptions.HOST_TRANSPORT, "tcp"), 12,
          "tcp");
      gathers++;
    });
  }

  @Test
  @Order(3)
  void executorJvmsOnOneHostExchangeByCrossMemoryAttachOrByTcpWhenForced() {
    cluster.explainFailure(() -> {
      TransportProbe.check(cluster, 2, HostTransport.AUTO, "cma");
      gathers++;
      TransportProbe.check(cluster, 2, HostTransport.TCP, "tcp");
    });
  }

  @Test
  @Order(4)
  void noSharedMemoryArrowMemoryOrCommunicatorIsLeftBehind() {
    cluster.explainFailure(() -> {
      assertTrue(gathers >= 1, "no gather ran before this check");
      GatherChecks.assertNothingLeftBehind(cluster);
    });
  }
}
