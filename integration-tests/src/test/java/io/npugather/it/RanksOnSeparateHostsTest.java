package io.npugather.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.npugather.CommunicatorOptions.HostTransport;
import io.npugather.it.SparkCluster.Network;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.apache.spark.SparkExecutorInfo;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * Ranks on different hosts: each Worker, and so each executor, in its own network namespace with
 * its own 10.x address, linked to the driver and the Master by a bridge. Nothing tells the host
 * backend which transport to use: it must see that the ranks are on different hosts and pick TCP by
 * itself. Needs root and iproute2 (CI has both); skipped otherwise, saying why.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class RanksOnSeparateHostsTest {
  /** Closed after the class's last test, whatever happened. */
  @AutoClose private static SparkCluster cluster;

  @BeforeAll
  static void startClusterOfTwoHosts() {
    String unavailable = NetworkNamespaces.unavailableReason();
    assumeTrue(unavailable == null, () -> "no simulated hosts: " + unavailable);
    cluster =
        SparkCluster.builder("RanksOnSeparateHostsTest")
            .executors(2)
            .network(Network.NAMESPACES)
            .start();
  }

  @Test
  @Order(1)
  void executorsRunOnTheirOwnHostsWithTheirOwnAddresses() {
    cluster.explainFailure(
        () -> {
          List<String> hosts =
              Arrays.stream(cluster.spark().sparkContext().statusTracker().getExecutorInfos())
                  .map(SparkExecutorInfo::host)
                  .filter(h -> !h.equals(cluster.driverAddress()))
                  .sorted()
                  .toList();
          assertEquals(List.of(cluster.workerAddress(0), cluster.workerAddress(1)), hosts);
        });
  }

  @Test
  @Order(2)
  void hostBackendPicksTcpByItselfBetweenRanksOnDifferentHosts() {
    cluster.explainFailure(
        () -> {
          List<TransportProbe.Rank> ranks =
              TransportProbe.check(cluster, 2, HostTransport.AUTO, "tcp");
          String driverNamespace = TransportProbe.netNamespace();
          assertNotEquals(
              ranks.get(0).netNamespace(),
              ranks.get(1).netNamespace(),
              "both ranks in one network namespace: " + ranks);
          for (TransportProbe.Rank rank : ranks) {
            assertNotEquals(driverNamespace, rank.netNamespace(), "rank in the driver's namespace");
          }
        });
  }

  @Test
  @Order(3)
  void everyPartitionHoldsEveryRowInRankOrderWhenRanksAreOnDifferentHosts() {
    cluster.explainFailure(() -> GatherChecks.gatherMixedRows(cluster, 2, Map.of(), 21, "tcp"));
  }

  @Test
  @Order(4)
  void noSharedMemoryArrowMemoryOrCommunicatorIsLeftBehind() {
    cluster.explainFailure(() -> GatherChecks.assertNothingLeftBehind(cluster));
  }
}
