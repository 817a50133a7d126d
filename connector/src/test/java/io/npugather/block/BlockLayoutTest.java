package io.npugather.block;

import static io.npugather.spark.arrow.ArrowTestSupport.TZ;
import static io.npugather.spark.arrow.ArrowTestSupport.randomRows;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.spark.arrow.TestAllocators;
import io.npugather.spark.arrow.read.GatheredPartitionsTest;
import io.npugather.spark.arrow.write.PartitionWriter;
import java.util.Arrays;
import java.util.Random;
import org.apache.arrow.memory.RootAllocator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class BlockLayoutTest {
  private RootAllocator root;

  @BeforeEach
  void openAllocator() {
    root = TestAllocators.newRoot();
  }

  @AfterEach
  void closeAllocator() {
    assertEquals(0, root.getAllocatedMemory());
    root.close();
  }

  static BlockLayout sample() {
    return new BlockLayout(
        0x8123456789abcdefL,
        1000,
        new long[] {1000, 1000, 4000},
        new long[] {3, 0, 1000},
        new long[] {125, 4004, 9000, 0, 125, 16000},
        new long[0]);
  }

  @Test
  void toBytesFromBytesRoundTrips() {
    BlockLayout l = sample();
    byte[] b = l.toBytes();
    BlockLayout back = BlockLayout.fromBytes(b);
    assertEquals(l, back);
    assertEquals(l.blockBytes(), back.blockBytes());
    assertEquals(0x8123456789abcdefL, back.schemaFingerprint());
    assertEquals(1000, back.rowCount());
    assertEquals(3, back.nodeCount());
    assertEquals(1000, back.nodeNullCount(2));
    assertArrayEquals(b, back.toBytes());
  }

  @Test
  void buffersArePaddedToEightBytesInsideTheBlock() {
    BlockLayout l = sample();
    long expected = 0;
    for (int i = 0; i < l.bufferCount(); i++) {
      assertEquals(expected, l.bufferOffset(i));
      assertEquals(0, l.bufferOffset(i) % 8);
      expected += (l.bufferLength(i) + 7) / 8 * 8;
    }
    assertEquals(expected, l.blockBytes());
    assertEquals(128 + 4008 + 9000 + 0 + 128 + 16000, l.blockBytes());
  }

  @Test
  void layoutIsSmall() {
    // A 17-column table of 1M rows: a few bytes per column.
    int cols = 17;
    long[] nodes = new long[cols];
    long[] nulls = new long[cols];
    long[] bufs = new long[2 * cols];
    Arrays.fill(nodes, 1_000_000);
    for (int i = 0; i < cols; i++) {
      bufs[2 * i] = 125_000;
      bufs[2 * i + 1] = 4_000_000;
    }
    byte[] b = new BlockLayout(1, 1_000_000, nodes, nulls, bufs, new long[0]).toBytes();
    assertTrue(b.length < 24 * cols, "layout of " + b.length + " bytes");
  }

  @Test
  void realPartitionLayoutsRoundTrip() {
    try (LocalBlock p =
        PartitionWriter.fromRows(
            randomRows(GatheredPartitionsTest.ALL_TYPES, 100, new Random(1), 0.2).iterator(),
            GatheredPartitionsTest.ALL_TYPES,
            TZ,
            root)) {
      BlockLayout l = p.layout();
      assertEquals(l, BlockLayout.fromBytes(l.toBytes()));
      long sum = 0;
      for (long len : p.segmentLengths()) {
        sum += len;
      }
      assertEquals(l.blockBytes(), sum);
    }
  }

  private static void assertRejected(byte[] bytes, String fragment) {
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> BlockLayout.fromBytes(bytes));
    assertTrue(
        e.getMessage().contains(fragment),
        "message '" + e.getMessage() + "' lacks '" + fragment + "'");
  }

  @Test
  void malformedBytesAreRejected() {
    byte[] good = sample().toBytes();
    assertRejected(null, "null");
    assertRejected(new byte[0], "truncated");
    byte[] v = good.clone();
    v[0] = 9;
    assertRejected(v, "unsupported version 9");
    for (int cut = 1; cut < good.length; cut++) {
      assertRejected(Arrays.copyOf(good, cut), "partition layout");
    }
    assertRejected(Arrays.copyOf(good, good.length + 1), "trailing");
  }

  @Test
  void hostileCountsAndNumbersAreRejected() {
    // version, fingerprint, rows=1, node count = 2^28 with nothing after it.
    byte[] hugeCount = {
      1, 0, 0, 0, 0, 0, 0, 0, 0, 1, (byte) 0x80, (byte) 0x80, (byte) 0x80, (byte) 0x80, 1
    };
    assertRejected(hugeCount, "node count");
    // A varint longer than 63 bits.
    byte[] overlong = new byte[1 + 8 + 10];
    overlong[0] = 1;
    Arrays.fill(overlong, 9, 18, (byte) 0xFF);
    overlong[18] = 1;
    assertRejected(overlong, "exceeds");
    // Non-minimal varint (0 encoded in two bytes).
    byte[] nonMinimal = {1, 0, 0, 0, 0, 0, 0, 0, 0, (byte) 0x80, 0};
    assertRejected(nonMinimal, "minimally");
    // A node whose null count exceeds its length: rows=1, 1 node (1, 2), 0 buffers, 0 variadic.
    byte[] nulls = {1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 2, 0, 0};
    assertRejected(nulls, "null count");
    // A node longer than an Arrow vector can be: length 2^31.
    byte[] longNode = {
      1,
      0,
      0,
      0,
      0,
      0,
      0,
      0,
      0,
      1,
      1,
      (byte) 0x80,
      (byte) 0x80,
      (byte) 0x80,
      (byte) 0x80,
      8,
      0,
      0,
      0
    };
    assertRejected(longNode, "length");
    // Buffers whose padded sizes overflow a long.
    byte[] big = {
      1,
      0,
      0,
      0,
      0,
      0,
      0,
      0,
      0,
      0,
      0,
      2,
      (byte) 0xFF,
      (byte) 0xFF,
      (byte) 0xFF,
      (byte) 0xFF,
      (byte) 0xFF,
      (byte) 0xFF,
      (byte) 0xFF,
      (byte) 0xFF,
      0x7F,
      (byte) 0xFF,
      (byte) 0xFF,
      (byte) 0xFF,
      (byte) 0xFF,
      (byte) 0xFF,
      (byte) 0xFF,
      (byte) 0xFF,
      (byte) 0xFF,
      0x7F,
      0
    };
    assertRejected(big, "overflow");
  }

  @Test
  void randomGarbageNeverEscapesAsAnotherException() {
    Random rnd = new Random(42);
    byte[] good = sample().toBytes();
    for (int i = 0; i < 20_000; i++) {
      byte[] b = good.clone();
      int flips = 1 + rnd.nextInt(3);
      for (int k = 0; k < flips; k++) {
        b[rnd.nextInt(b.length)] = (byte) rnd.nextInt();
      }
      if (rnd.nextInt(4) == 0) {
        b = Arrays.copyOf(b, rnd.nextInt(b.length + 4));
      }
      try {
        BlockLayout l = BlockLayout.fromBytes(b);
        assertEquals(l, BlockLayout.fromBytes(l.toBytes()));
      } catch (IllegalArgumentException expected) {
        // fine: a clear rejection
      }
    }
  }
}
