package io.npugather.spark.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.junit.jupiter.api.Test;

class HugePagesTest {
  @Test
  void hugePageAdviceTakesAnyLargeBufferAndRefusesBadArguments() throws Exception {
    BufferAllocator allocator = new RootAllocator();
    try (allocator;
        ArrowBuf buf = allocator.buffer(6L << 20)) {
      HugePages.advise(buf.memoryAddress(), buf.capacity());
      HugePages.advise(buf.memoryAddress(), 100); // small: left alone
      HugePages.advise(0, 0);
      buf.setBytes(0, new byte[] {1, 2, 3}); // still ordinary memory
      assertEquals(3, buf.getByte(2));
    }
    IllegalArgumentException nullAddress =
        assertThrows(IllegalArgumentException.class, () -> HugePages.advise(0, 8));
    assertTrue(nullAddress.getMessage().contains("address 0, bytes 8"), nullAddress.getMessage());
    assertThrows(IllegalArgumentException.class, () -> HugePages.advise(4096, -1));
  }
}
