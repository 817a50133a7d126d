package io.npugather.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.NpuGatherException;
import io.npugather.ResultCode;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** A peer's rendezvous entry: decoded as sent, or refused with whose fault it is. */
class RankEntryTest {
  private static final RankEntry ENTRY =
      new RankEntry(
          "host-a",
          "jvm-1",
          3,
          1L << 30,
          "spark.executor.memoryOverhead",
          new byte[] {1, 2, 3},
          new byte[] {4, 5});

  @Test
  void anEntryDecodesAsItWasSent() {
    RankEntry back = RankEntry.fromBytes(0, 1, ENTRY.toBytes());
    assertEquals(ENTRY.host(), back.host());
    assertEquals(ENTRY.process(), back.process());
    assertEquals(ENTRY.deviceId(), back.deviceId());
    assertEquals(ENTRY.receiveLimit(), back.receiveLimit());
    assertEquals(ENTRY.receiveLimitSource(), back.receiveLimitSource());
    assertArrayEquals(ENTRY.rootInfo(), back.rootInfo());
    assertArrayEquals(ENTRY.payload(), back.payload());
  }

  @Test
  void anEntryOfAnotherVersionIsAnInvalidUsageNamingTheSender() {
    byte[] bytes = ENTRY.toBytes();
    bytes[0] = 9;
    NpuGatherException e =
        assertThrows(NpuGatherException.class, () -> RankEntry.fromBytes(0, 1, bytes));
    assertEquals(ResultCode.INVALID_USAGE, e.code(), e.getMessage());
    assertEquals(0, e.rank());
    assertTrue(
        e.getMessage().contains("rank 1 sent a rendezvous entry of version 9"), e.getMessage());
  }

  @Test
  void aTruncatedOrOverlongEntryIsARemoteErrorNamingTheSender() {
    byte[] bytes = ENTRY.toBytes();
    NpuGatherException truncated =
        assertThrows(
            NpuGatherException.class,
            () -> RankEntry.fromBytes(2, 1, Arrays.copyOf(bytes, bytes.length - 1)));
    assertEquals(ResultCode.REMOTE_ERROR, truncated.code(), truncated.getMessage());
    assertEquals(2, truncated.rank());
    assertTrue(
        truncated.getMessage().contains("rank 1's rendezvous entry is truncated"),
        truncated.getMessage());
    NpuGatherException trailing =
        assertThrows(
            NpuGatherException.class,
            () -> RankEntry.fromBytes(2, 1, Arrays.copyOf(bytes, bytes.length + 1)));
    assertEquals(ResultCode.REMOTE_ERROR, trailing.code(), trailing.getMessage());
    assertTrue(
        trailing.getMessage().contains("rank 1's rendezvous entry has trailing bytes"),
        trailing.getMessage());
  }
}
