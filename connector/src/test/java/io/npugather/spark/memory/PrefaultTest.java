package io.npugather.spark.memory;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.memory.netty.NettyAllocationManager;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Populating a fresh receive buffer while a writer fills it, as a collective does. */
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class PrefaultTest {
  private static final long MIB = 1L << 20;

  private BufferAllocator allocator;

  @BeforeEach
  void open() {
    LargeBufferCache cache =
        new LargeBufferCache(
            NettyAllocationManager.FACTORY, HugePages.ADVICE_MIN_BYTES, 0, Duration.ofMinutes(1));
    allocator =
        new RootAllocator(RootAllocator.configBuilder().allocationManagerFactory(cache).build());
  }

  @AfterEach
  void nothingLeaks() {
    assertEquals(0, allocator.getAllocatedMemory(), allocator.toVerboseString());
    allocator.close();
  }

  @Test
  void everyByteWrittenWhilePagesArePopulatedIsKept() throws Exception {
    Random random = new Random(17);
    for (long bytes : new long[] {5 * MIB + 7, 40 * MIB, 64 * MIB - 3}) {
      byte[] data = new byte[(int) bytes];
      random.nextBytes(data);
      try (ArrowBuf buf = allocator.buffer(bytes)) {
        Prefault prefault = Prefault.start(buf, bytes);
        try (prefault) {
          // From the back in 1 MiB steps: the writer meets pages before and after populating.
          for (long end = bytes; end > 0; ) {
            int step = (int) Math.min(MIB, end);
            end -= step;
            buf.setBytes(end, data, (int) end, step);
          }
        }
        byte[] read = new byte[data.length];
        buf.getBytes(0, read);
        assertArrayEquals(data, read, bytes + " bytes");
      }
    }
  }

  @Test
  void aPrefaultLeftToRunPopulatesTheWholeBufferWithoutChangingIt() throws Exception {
    long bytes = 20 * MIB + 1;
    byte[] data = new byte[(int) bytes];
    new Random(23).nextBytes(data);
    try (ArrowBuf buf = allocator.buffer(bytes)) {
      buf.setBytes(0, data);
      try (Prefault prefault = Prefault.start(buf, bytes)) {
        assertTrue(prefault.awaitDone(TimeUnit.MINUTES.toMillis(1)));
        assertEquals(bytes, prefault.populatedBytes());
      }
      byte[] read = new byte[data.length];
      buf.getBytes(0, read);
      assertArrayEquals(data, read);
    }
  }

  @Test
  void aBufferReleasedWhilePopulatedStaysMappedUntilThePopulatingEnds() throws Exception {
    // The cache keeps nothing idle: a released buffer's memory is unmapped at once, and a touch
    // of it would crash the JVM.
    for (int round = 0; round < 5; round++) {
      long bytes = 96 * MIB;
      ArrowBuf buf = allocator.buffer(bytes);
      Prefault prefault = Prefault.start(buf, bytes);
      buf.close(); // the owner lets go first, as a failing task does
      try (prefault) {
        assertTrue(prefault.awaitDone(TimeUnit.MINUTES.toMillis(1)));
      }
      assertEquals(0, allocator.getAllocatedMemory(), "the populating thread let go too");
    }
  }

  @Test
  void closeWaitsForTheChunkInProgressThroughAnInterrupt() throws Exception {
    long bytes = 64 * MIB;
    try (ArrowBuf buf = allocator.buffer(bytes)) {
      Prefault prefault = Prefault.start(buf, bytes);
      Thread.currentThread().interrupt();
      try {
        prefault.close();
        assertTrue(Thread.interrupted(), "the interrupt is kept for the caller");
      } finally {
        Thread.interrupted();
      }
      long stoppedAt = prefault.populatedBytes();
      Thread.sleep(50);
      assertEquals(stoppedAt, prefault.populatedBytes(), "nothing populated after close");
    }
  }

  @Test
  void argumentsAreCheckedAndNothingIsNothing() {
    Prefault.start(null, 0).close();
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> Prefault.start(null, 8));
    assertTrue(e.getMessage().contains("bytes 8 of a buffer of none"), e.getMessage());
    try (ArrowBuf buf = allocator.buffer(4096)) {
      assertThrows(IllegalArgumentException.class, () -> Prefault.start(buf, -1));
      e = assertThrows(IllegalArgumentException.class, () -> Prefault.start(buf, 8192));
      assertTrue(e.getMessage().contains("bytes 8192 of a buffer of 4096 bytes"), e.getMessage());
    }
  }
}
