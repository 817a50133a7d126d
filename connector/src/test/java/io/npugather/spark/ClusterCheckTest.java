package io.npugather.spark;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

class ClusterCheckTest {
  private static SparkContext sc;

  @BeforeAll
  static void startSpark() {
    sc = new SparkContext(new SparkConf()
        .setMaster("local[2]")
        .setAppName("ClusterCheckTest")
        .set("spark.ui.enabled", "false"));
  }

  @AfterAll
  static void stopSpark() {
    if (sc != null) {
      sc.stop();
    }
  }

  @Test
  void localTwoRunsTwoRanks() {
    assertDoesNotThrow(() -> ClusterCheck.requireBarrierSlots(sc, 2));
    assertDoesNotThrow(() -> ClusterCheck.requireBarrierSlots(sc, 1));
  }

  @Test
  void localTwoCannotRunFourRanksAndSaysWhatIsNeededAndAvailable() {
    long start = System.nanoTime();
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> ClusterCheck.requireBarrierSlots(sc, 4));
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
    SparkConf cluster = new SparkConf(false)
        .set("spark.master", "spark://master:7077")
        .set("spark.dynamicAllocation.enabled", "true");
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> ClusterCheck.checkDynamicAllocation(cluster, 4));
    assertTrue(e.getMessage().contains("spark.dynamicAllocation.enabled=true"), e.getMessage());
    assertTrue(e.getMessage().contains("barrier"), e.getMessage());
    // the running local context's own configuration with dynamic allocation switched on
    SparkConf local = sc.getConf()
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
    String m = ClusterCheck.slotMessage(3, 0, "spark://m:7077: 0 executors with 0 cores in total, spark.task.cpus=1");
    assertTrue(m.contains("needs 3") && m.contains("offers 0") && m.contains("add executors or cores"), m);
  }
}
