package io.npugather.spark.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.memory.netty.NettyAllocationManager;
import org.junit.jupiter.api.Assumptions;
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

  /** Whether the kernel offers transparent huge pages to memory advised for them. */
  private static boolean transparentHugePagesOffered() throws IOException {
    Path enabled = Path.of("/sys/kernel/mm/transparent_hugepage/enabled");
    return Files.isReadable(enabled) && !Files.readString(enabled).contains("[never]");
  }

  /** AnonHugePages, in KiB, of the mapping of this process that contains {@code address}. */
  private static long anonHugePagesKibAt(long address) throws IOException {
    List<String> lines = Files.readAllLines(Path.of("/proc/self/smaps"));
    boolean inside = false;
    for (String line : lines) {
      int dash = line.indexOf('-');
      int space = line.indexOf(' ');
      if (dash > 0 && space > dash && line.substring(0, dash).matches("[0-9a-f]+")) {
        long lo = Long.parseUnsignedLong(line.substring(0, dash), 16);
        long hi = Long.parseUnsignedLong(line.substring(dash + 1, space), 16);
        inside = lo <= address && address < hi;
      } else if (inside && line.startsWith("AnonHugePages:")) {
        return Long.parseLong(line.replaceAll("[^0-9]", ""));
      }
    }
    return 0;
  }

  @Test
  void aFreshLargeBufferIsFaultedInAsHugePagesWhereTheHostOffersThem() throws Exception {
    Assumptions.assumeTrue(transparentHugePagesOffered(), "no transparent huge pages here");
    LargeBufferCache cache =
        new LargeBufferCache(
            NettyAllocationManager.FACTORY, HugePages.ADVICE_MIN_BYTES, 0, Duration.ofMinutes(1));
    long bytes = 64L << 20;
    byte[] data = new byte[(int) bytes];
    new Random(3).nextBytes(data);
    try (BufferAllocator allocator =
            new RootAllocator(
                RootAllocator.configBuilder().allocationManagerFactory(cache).build());
        ArrowBuf buf = allocator.buffer(bytes)) {
      buf.setBytes(0, data);
      long hugeKib = anonHugePagesKibAt(buf.memoryAddress());
      byte[] read = new byte[data.length];
      buf.getBytes(0, read);
      assertTrue(Arrays.equals(data, read), "every byte");
      // Not every 2 MiB page need be huge (the kernel falls back when it finds none free).
      assertTrue(hugeKib >= 2048, "AnonHugePages of the buffer's mapping: " + hugeKib + " kB");
    }
    assertEquals(new LargeBufferCache.Stats(0, 0, 0, 1), cache.stats());
  }
}
