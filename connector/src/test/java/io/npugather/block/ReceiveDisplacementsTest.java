package io.npugather.block;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import org.junit.jupiter.api.Test;

class ReceiveDisplacementsTest {
  @Test
  void displacementsAreAlignedPrefixSums() {
    BlockLayout a = BlockLayoutTest.sample();
    BlockLayout empty =
        new BlockLayout(1, 0, new long[] {0}, new long[] {0}, new long[] {0, 0}, new long[0]);
    ReceiveDisplacements d = ReceiveDisplacements.of(List.of(a, empty, a), -1);
    assertArrayEquals(new long[] {0, a.blockBytes(), a.blockBytes()}, d.displacements());
    assertEquals(2 * a.blockBytes(), d.totalBytes());
    assertArrayEquals(new long[] {a.blockBytes(), 0, a.blockBytes()}, d.counts());
  }

  @Test
  void theSkippedRankTakesNoRoom() {
    BlockLayout a = BlockLayoutTest.sample();
    ReceiveDisplacements d = ReceiveDisplacements.of(List.of(a, a, a), 1);
    assertArrayEquals(new long[] {0, 0, a.blockBytes()}, d.displacements());
    assertEquals(2 * a.blockBytes(), d.totalBytes());
  }
}
