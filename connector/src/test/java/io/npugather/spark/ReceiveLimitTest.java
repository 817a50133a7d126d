package io.npugather.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.NpuGatherException;
import io.npugather.ResultCode;
import io.npugather.spark.memory.GatherMemory;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The bound on what one task receives in a gather: how every rank fails when a rank passes it. */
class ReceiveLimitTest {
  private static final long GIB = 1L << 30;
  private static final long MIB = 1L << 20;

  @Test
  void everyRankReportsTheSameRankThatCannotReceiveWithItsNeedAndItsLimit() {
    List<RankEntry> entries =
        List.of(
            new RankEntry(
                "a", "pa", -1, 1 * GIB, "spark.executor.memoryOverhead", new byte[0], new byte[0]),
            new RankEntry(
                "b", "pb", -1, 256 * MIB, "-XX:MaxDirectMemorySize", new byte[0], new byte[0]),
            new RankEntry(
                "c", "pc", -1, 1 * GIB, "spark.executor.memoryOverhead", new byte[0], new byte[0]));
    long[] blocks = {200 * MIB, 100 * MIB, 200 * MIB};
    NpuGatherException e =
        assertThrows(
            NpuGatherException.class, () -> RankGroup.checkReceiveFits(0, entries, blocks));
    assertEquals(ResultCode.INVALID_USAGE, e.code(), e.getMessage());
    assertEquals(0, e.rank());
    String text = e.getMessage();
    assertTrue(
        text.startsWith(
            "INVALID_USAGE: rank 1 (on b) would receive " + 400 * MIB + " bytes (400.0 MiB)"),
        text);
    assertTrue(
        text.contains("limit of " + 256 * MIB + " bytes (256.0 MiB) from -XX:MaxDirectMemorySize"),
        text);
    assertTrue(text.contains(GatherMemory.MAX_GATHER_BYTES), text);
    RankGroup.checkReceiveFits(
        2, entries, new long[] {100 * MIB, 300 * MIB, 100 * MIB}); // fits everyone
  }

  @Test
  void aLimitSetByMaxGatherBytesIsNamedOnce() {
    String source = GatherMemory.MAX_GATHER_BYTES + "=1m";
    List<RankEntry> entries =
        List.of(
            new RankEntry("a", "pa", -1, MIB, source, new byte[0], new byte[0]),
            new RankEntry("b", "pb", -1, MIB, source, new byte[0], new byte[0]));
    NpuGatherException e =
        assertThrows(
            NpuGatherException.class,
            () -> RankGroup.checkReceiveFits(1, entries, new long[] {2 * MIB, 2 * MIB}));
    assertEquals(
        "INVALID_USAGE: rank 0 (on a) would receive "
            + 2 * MIB
            + " bytes (2.0 MiB) in this gather, more than its limit of "
            + MIB
            + " bytes (1.0 MiB) from spark.npugather.memory.maxGatherBytes=1m; raise it (or gather"
            + " fewer rows or columns)",
        e.getMessage().substring(e.getMessage().indexOf("INVALID_USAGE: ")));
  }
}
