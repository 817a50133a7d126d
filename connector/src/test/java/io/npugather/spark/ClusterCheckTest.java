package io.npugather.spark;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.Backend;
import io.npugather.spark.testing.LocalSpark;
import java.util.List;
import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

class ClusterCheckTest {
  @RegisterExtension
  static final LocalSpark SPARK = LocalSpark.cores(2).onStart(s -> sc = s.sparkContext());

  private static SparkContext sc;

  @Test
  void localTwoRunsTwoRanks() {
    assertDoesNotThrow(() -> ClusterCheck.requireBarrierSlots(sc, 2));
    assertDoesNotThrow(() -> ClusterCheck.requireBarrierSlots(sc, 1));
  }

  @Test
  void localTwoCannotRunFourRanksAndSaysWhatIsNeededAndAvailable() {
    long start = System.nanoTime();
    IllegalStateException e =
        assertThrows(IllegalStateException.class, () -> ClusterCheck.requireBarrierSlots(sc, 4));
    String m = e.getMessage();
    assertTrue(m.contains("needs 4 concurrent task slots"), m);
    assertTrue(m.contains("offers 2"), m);
    assertTrue(m.contains("local[2]") && m.contains("spark.task.cpus=1"), m);
    assertTrue(m.contains("df.repartition(2)"), m);
    assertTrue((System.nanoTime() - start) / 1_000_000 < 5_000, "local masters fail at once");
  }

  @Test
  void badRankSizeIsRejected() {
    assertThrows(IllegalArgumentException.class, () -> ClusterCheck.requireBarrierSlots(sc, 0));
  }

  @Test
  void dynamicAllocationIsAClearFailure() {
    SparkConf cluster =
        new SparkConf(false)
            .set("spark.master", "spark://master:7077")
            .set("spark.dynamicAllocation.enabled", "true");
    IllegalStateException e =
        assertThrows(
            IllegalStateException.class, () -> ClusterCheck.checkDynamicAllocation(cluster, 4));
    assertTrue(e.getMessage().contains("spark.dynamicAllocation.enabled=true"), e.getMessage());
    assertTrue(e.getMessage().contains("barrier"), e.getMessage());
    // the running local context's own configuration with dynamic allocation switched on
    SparkConf local =
        sc.getConf()
            .set("spark.dynamicAllocation.enabled", "true")
            .set("spark.dynamicAllocation.testing", "true");
    assertThrows(IllegalStateException.class, () -> ClusterCheck.checkDynamicAllocation(local, 2));
    // Spark ignores dynamic allocation on a plain local master, and so does the check
    SparkConf plainLocal = sc.getConf().set("spark.dynamicAllocation.enabled", "true");
    assertDoesNotThrow(() -> ClusterCheck.checkDynamicAllocation(plainLocal, 2));
    assertDoesNotThrow(() -> ClusterCheck.checkDynamicAllocation(sc.getConf(), 2));
  }

  @Test
  void messageForAnEmptyClusterAdvisesMoreResources() {
    String m =
        ClusterCheck.slotMessage(
            3, 0, "spark://m:7077: 0 executors with 0 cores in total, spark.task.cpus=1");
    assertTrue(
        m.contains("needs 3") && m.contains("offers 0") && m.contains("add executors or cores"), m);
  }

  @Test
  void localMasterAskedForTaskResourcesFailsAtOnceInsteadOfWaitingForever() {
    IllegalStateException e =
        assertThrows(
            IllegalStateException.class,
            () -> ClusterCheck.checkLocalTaskResources("local[2]", Map.of("npu", 1.0), 2));
    String m = e.getMessage();
    assertTrue(m.contains("spark.task.resource.npu.amount=1,") && m.contains("local[2]"), m);
    assertTrue(m.contains("only cores") && m.contains("never be scheduled"), m);
    assertTrue(
        m.contains("spark.driver.resource.npu.amount")
            && m.contains("spark.driver.resource.npu.discoveryScript"),
        m);
    assertDoesNotThrow(() -> ClusterCheck.checkLocalTaskResources("local[2]", Map.of(), 2));
    assertDoesNotThrow(
        () -> ClusterCheck.checkLocalTaskResources("spark://m:7077", Map.of("npu", 1.0), 2));
    assertDoesNotThrow(
        () ->
            ClusterCheck.checkLocalTaskResources("local-cluster[2,1,1024]", Map.of("npu", 1.0), 2));
  }

  @Test
  void deviceBackendWithoutAnyDeviceSourceSaysWhatToConfigure() {
    // local master: neither task resources (never offered) nor driver addresses
    IllegalStateException local =
        assertThrows(
            IllegalStateException.class,
            () ->
                ClusterCheck.requireDevices(
                    sc, AllGatherOptions.defaults().withBackend("hccl"), 2));
    String m = local.getMessage();
    assertTrue(m.contains("backend hccl") && m.contains("local[2]"), m);
    assertTrue(
        m.contains("spark.driver.resource.npu.amount=2")
            && m.contains("spark.driver.resource.npu.discoveryScript"),
        m);
    // cluster: tasks ask another resource only
    IllegalStateException cluster =
        assertThrows(
            IllegalStateException.class,
            () ->
                ClusterCheck.planDevices(
                    "spark://m:7077", Backend.LCCL, "npu", Map.of("gpu", 1.0), null, 2));
    m = cluster.getMessage();
    assertTrue(
        m.contains("backend lccl") && m.contains("no 'npu' resource") && m.contains("[gpu]"), m);
    assertTrue(
        m.contains("spark.task.resource.npu.amount=1")
            && m.contains("spark.executor.resource.npu.discoveryScript")
            && m.contains(AllGatherOptions.RESOURCE_NAME),
        m);
    // backend host needs no device
    assertFalse(ClusterCheck.requireDevices(sc, AllGatherOptions.defaults(), 2).byRank());
    assertFalse(
        ClusterCheck.planDevices("spark://m:7077", Backend.HOST, "npu", Map.of(), null, 2)
            .byRank());
    assertFalse(
        ClusterCheck.planDevices("spark://m:7077", Backend.HCCL, "npu", Map.of("npu", 1.0), null, 2)
            .byRank());
  }

  @Test
  void localMasterBindsTheDriversAddressesByRankAndRefusesTooFewOrRepeated() {
    DeviceBinding binding =
        ClusterCheck.planDevices(
            "local[2]", Backend.HCCL, "npu", Map.of(), List.of("3", "5", "7"), 2);
    assertTrue(binding.byRank());
    assertEquals("driver's 'npu' addresses by rank [3, 5]", binding.toString());

    IllegalStateException few =
        assertThrows(
            IllegalStateException.class,
            () ->
                ClusterCheck.planDevices(
                    "local[4]", Backend.HCCL, "npu", Map.of(), List.of("0", "1"), 3));
    String m = few.getMessage();
    assertTrue(m.contains("runs 3 ranks") && m.contains("discovered 2 addresses [0, 1]"), m);
    assertTrue(m.contains("spark.driver.resource.npu.amount"), m);

    IllegalStateException twice =
        assertThrows(
            IllegalStateException.class,
            () ->
                ClusterCheck.planDevices(
                    "local[2]", Backend.HOST, "npu", Map.of(), List.of("0", "0"), 2));
    m = twice.getMessage();
    assertTrue(m.contains("ranks 0 and 1 would both bind device 0") && m.contains("[0, 0]"), m);

    IllegalStateException notAnId =
        assertThrows(
            IllegalStateException.class,
            () ->
                ClusterCheck.planDevices(
                    "local[2]", Backend.HCCL, "npu", Map.of(), List.of("0", "x"), 2));
    assertTrue(notAnId.getMessage().contains("address 'x'"), notAnId.getMessage());
  }
}
