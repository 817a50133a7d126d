package io.npugather.spark.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.junit.jupiter.api.Test;

/** The bound on what one task receives in a gather: where it comes from. */
class ReceiveLimitTest {
  private static final long GIB = 1L << 30;
  private static final long MIB = 1L << 20;

  @Test
  void theSettingWinsOverTheJvmsLimits() {
    GatherMemory.ReceiveLimit limit =
        GatherMemory.receiveLimit(
            Map.of(GatherMemory.MAX_GATHER_BYTES, "3g"), true, 256 * MIB, true);
    assertEquals(3 * GIB, limit.bytes());
    assertTrue(limit.source().contains("spark.npugather.memory.maxGatherBytes=3g"), limit.source());
  }

  @Test
  void onAnExecutorTheOffHeapBudgetBoundsIt() {
    // Spark's default overhead: max(384m, 0.1 x executor memory).
    assertEquals(
        384 * MIB,
        GatherMemory.receiveLimit(Map.of("spark.executor.memory", "2g"), true, 8 * GIB, false)
            .bytes());
    assertEquals(
        819 * MIB,
        GatherMemory.receiveLimit(Map.of("spark.executor.memory", "8g"), true, 16 * GIB, false)
            .bytes(),
        MIB);
    GatherMemory.ReceiveLimit set =
        GatherMemory.receiveLimit(
            Map.of(
                "spark.executor.memoryOverhead",
                "2g",
                "spark.memory.offHeap.enabled",
                "true",
                "spark.memory.offHeap.size",
                "1g"),
            true,
            16 * GIB,
            false);
    assertEquals(3 * GIB, set.bytes());
    assertTrue(
        set.source().contains("spark.executor.memoryOverhead plus spark.memory.offHeap.size"),
        set.source());
    // The JVM's direct memory limit when it is the smaller one, named as set.
    GatherMemory.ReceiveLimit direct =
        GatherMemory.receiveLimit(
            Map.of("spark.executor.memoryOverhead", "2g"), true, 256 * MIB, true);
    assertEquals(256 * MIB, direct.bytes());
    assertEquals("-XX:MaxDirectMemorySize", direct.source());
  }

  @Test
  void onTheDriverOrALocalMasterTheDirectMemoryLimitBoundsIt() {
    GatherMemory.ReceiveLimit limit =
        GatherMemory.receiveLimit(Map.of("spark.executor.memory", "1g"), false, 5 * GIB, false);
    assertEquals(5 * GIB, limit.bytes());
    assertTrue(limit.source().contains("-XX:MaxDirectMemorySize"), limit.source());
  }

  @Test
  void aBadSettingNamesTheKey() {
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class,
            () ->
                GatherMemory.receiveLimit(
                    Map.of(GatherMemory.MAX_GATHER_BYTES, "lots"), false, GIB, false));
    assertTrue(e.getMessage().contains(GatherMemory.MAX_GATHER_BYTES), e.getMessage());
    assertTrue(e.getMessage().contains("'lots'"), e.getMessage());
  }
}
