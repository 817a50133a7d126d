package io.npugather;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.bridge.NativeCore;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.junit.jupiter.api.Test;

/** A native call's result code becomes one exception, the same for every wrapper. */
class NativeStatusTest {
  static {
    NativeLibrary.load();
  }

  @Test
  void aFailedCallIsItsCodeTheOperationTheRankAndTheLibrarysText() {
    int rc = NativeCore.npg_populate_pages(0, 8);
    NpuGatherException e =
        assertThrows(NpuGatherException.class, () -> NativeStatus.check(rc, "populatePages", 3));
    assertFalse(e instanceof VendorException, "no vendor code caused it");
    assertEquals(ResultCode.INVALID_ARGUMENT, e.code());
    assertEquals("populatePages", e.operation());
    assertEquals(3, e.rank());
    assertTrue(e.getMessage().contains("address is NULL but bytes is 8"), e.getMessage());
  }

  @Test
  void successThrowsNothing() {
    NativeStatus.check(0, "anything", 0);
  }

  @Test
  void nativeMemoryRefusesBadRangesBeforeTheCallAndTakesGoodOnes() {
    IllegalArgumentException nullAddress =
        assertThrows(IllegalArgumentException.class, () -> NativeMemory.populatePages(0, 8));
    assertEquals(
        "populatePages: address 0, bytes 8; allowed: bytes >= 0 at a non-zero address"
            + " (0 bytes: any address)",
        nullAddress.getMessage());
    assertThrows(IllegalArgumentException.class, () -> NativeMemory.adviseHugePages(4096, -1));
    try (BufferAllocator allocator = new RootAllocator();
        ArrowBuf buf = allocator.buffer(6L << 20)) {
      buf.setByte(0, 7);
      NativeMemory.adviseHugePages(buf.memoryAddress(), buf.capacity());
      NativeMemory.populatePages(buf.memoryAddress(), buf.capacity());
      NativeMemory.populatePages(0, 0);
      assertEquals(7, buf.getByte(0), "neither call changes a byte");
    }
  }
}
