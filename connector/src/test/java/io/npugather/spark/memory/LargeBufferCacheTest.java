package io.npugather.spark.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.memory.netty.NettyAllocationManager;
import org.apache.arrow.memory.util.MemoryUtil;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The cache behind an Arrow root allocator, as the tasks use it. */
class LargeBufferCacheTest {
  private static final long MIB = 1L << 20;
  private static final long MIN = 4 * MIB;

  private LargeBufferCache cache;
  private RootAllocator root;

  private BufferAllocator open(long maxIdleBytes, Duration idleTimeout) {
    cache = new LargeBufferCache(NettyAllocationManager.FACTORY, MIN, maxIdleBytes, idleTimeout);
    root = new RootAllocator(RootAllocator.configBuilder().allocationManagerFactory(cache).build());
    return root;
  }

  private BufferAllocator open() {
    return open(1L << 30, Duration.ofMinutes(10));
  }

  @AfterEach
  void nothingAllocatedAndEveryRegionFreed() {
    if (root != null) {
      assertEquals(0, root.getAllocatedMemory(), root.toVerboseString());
      root.close();
    }
    if (cache != null) {
      cache.trim();
      assertEquals(0, cache.stats().idleBytes());
      assertEquals(0, cache.stats().idleRegions());
    }
  }

  private static long addressOfReleased(BufferAllocator allocator, long bytes) {
    try (ArrowBuf buf = allocator.buffer(bytes)) {
      assertEquals(bytes, allocator.getAllocatedMemory(), "accounted: the requested size");
      return buf.memoryAddress();
    }
  }

  @Test
  void aReleasedLargeBufferIsReusedByTheNextOfItsSize() {
    BufferAllocator allocator = open();
    long first = addressOfReleased(allocator, 24 * MIB);
    assertEquals(new LargeBufferCache.Stats(24 * MIB, 1, 0, 1), cache.stats());
    assertEquals(first, addressOfReleased(allocator, 24 * MIB));
    assertEquals(new LargeBufferCache.Stats(24 * MIB, 1, 1, 1), cache.stats());
  }

  @Test
  void aRegionServesRequestsUpToAnEighthSmallerButNotMuchSmallerOnes() {
    BufferAllocator allocator = open();
    long region = addressOfReleased(allocator, 64 * MIB);
    assertEquals(region, addressOfReleased(allocator, 57 * MIB));
    assertNotEquals(region, addressOfReleased(allocator, 40 * MIB));
    assertEquals(2, cache.stats().allocated());
    assertEquals(1, cache.stats().reused());
  }

  @Test
  void aSlightlyLargerRequestFitsTheRegionRoundedUpToHugePages() {
    BufferAllocator allocator = open();
    long region = addressOfReleased(allocator, 17 * MIB + 1);
    assertEquals(18 * MIB, cache.stats().idleBytes(), "regions are whole huge pages");
    assertEquals(region, addressOfReleased(allocator, 18 * MIB));
  }

  @Test
  void smallBuffersAreLeftToTheSmallFactory() {
    BufferAllocator allocator = open();
    addressOfReleased(allocator, MIN / 2);
    assertEquals(new LargeBufferCache.Stats(0, 0, 0, 0), cache.stats());
  }

  @Test
  void liveBuffersNeverShareARegionAndKeepTheirBytes() {
    BufferAllocator allocator = open();
    Random random = new Random(7);
    try (ArrowBuf a = allocator.buffer(20 * MIB);
        ArrowBuf b = allocator.buffer(20 * MIB)) {
      byte[] bytesA = new byte[(int) a.capacity()];
      byte[] bytesB = new byte[(int) b.capacity()];
      random.nextBytes(bytesA);
      random.nextBytes(bytesB);
      a.setBytes(0, bytesA);
      b.setBytes(0, bytesB);
      try (ArrowBuf c = allocator.buffer(20 * MIB)) {
        c.setZero(0, c.capacity());
      }
      byte[] readA = new byte[bytesA.length];
      byte[] readB = new byte[bytesB.length];
      a.getBytes(0, readA);
      b.getBytes(0, readB);
      assertTrue(Arrays.equals(bytesA, readA), "a's bytes");
      assertTrue(Arrays.equals(bytesB, readB), "b's bytes");
    }
    assertEquals(3, cache.stats().allocated());
  }

  @Test
  void idleBytesStayWithinTheLimitTheLongestIdleFreedFirst() {
    BufferAllocator allocator = open(20 * MIB, Duration.ofMinutes(10));
    ArrowBuf a = allocator.buffer(8 * MIB);
    ArrowBuf b = allocator.buffer(8 * MIB);
    ArrowBuf c = allocator.buffer(8 * MIB);
    long newest = c.memoryAddress();
    a.close();
    b.close();
    c.close(); // 24 MiB idle would exceed 20: a's region goes
    assertEquals(new LargeBufferCache.Stats(16 * MIB, 2, 0, 3), cache.stats());
    assertEquals(newest, addressOfReleased(allocator, 8 * MIB), "the newest idle region first");
  }

  @Test
  void aLimitOfZeroKeepsNothing() {
    BufferAllocator allocator = open(0, Duration.ofMinutes(10));
    addressOfReleased(allocator, 8 * MIB);
    addressOfReleased(allocator, 8 * MIB);
    assertEquals(new LargeBufferCache.Stats(0, 0, 0, 2), cache.stats());
  }

  @Test
  void idleRegionsAreFreedAfterTheIdleTimeout() throws InterruptedException {
    BufferAllocator allocator = open(1L << 30, Duration.ofMillis(100));
    addressOfReleased(allocator, 8 * MIB);
    addressOfReleased(allocator, 16 * MIB);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (cache.stats().idleRegions() != 0 && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    assertEquals(new LargeBufferCache.Stats(0, 0, 0, 2), cache.stats());
  }

  @Test
  void concurrentTasksNeverSeeEachOthersBytes() throws Exception {
    BufferAllocator allocator = open(64 * MIB, Duration.ofMinutes(10));
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      List<Future<?>> tasks = new ArrayList<>();
      for (int t = 0; t < 2; t++) {
        long seed = t;
        tasks.add(
            pool.submit(
                () -> {
                  Random random = new Random(seed);
                  for (int i = 0; i < 100; i++) {
                    long bytes = (4 + random.nextInt(12)) * MIB;
                    byte fill = (byte) random.nextInt();
                    try (ArrowBuf buf = allocator.buffer(bytes)) {
                      MemoryUtil.setMemory(buf.memoryAddress(), bytes, fill);
                      Thread.yield();
                      for (long at = 0; at < bytes; at += 4096) {
                        assertEquals(fill, buf.getByte(at), "byte " + at + " of a live buffer");
                      }
                      assertEquals(fill, buf.getByte(bytes - 1));
                    }
                  }
                  return null;
                }));
      }
      for (Future<?> task : tasks) {
        task.get(2, TimeUnit.MINUTES);
      }
    } finally {
      pool.shutdownNow();
    }
    assertTrue(cache.stats().reused() > 0, cache.stats().toString());
    assertTrue(cache.stats().idleBytes() <= 64 * MIB, cache.stats().toString());
  }

  /** One gather's large buffers: {@code count} of {@code bytes}, each filled and checked. */
  private static void gather(BufferAllocator allocator, int count, long bytes, Random random) {
    List<ArrowBuf> live = new ArrayList<>();
    List<byte[]> written = new ArrayList<>();
    try {
      for (int i = 0; i < count; i++) {
        ArrowBuf buf = allocator.buffer(bytes);
        live.add(buf);
        byte[] data = new byte[(int) bytes];
        random.nextBytes(data);
        buf.setBytes(0, data);
        written.add(data);
      }
      for (int i = 0; i < count; i++) {
        byte[] read = new byte[(int) bytes];
        live.get(i).getBytes(0, read);
        assertTrue(Arrays.equals(written.get(i), read), "bytes of buffer " + i);
      }
    } finally {
      live.forEach(ArrowBuf::close);
    }
  }

  @Test
  void upToPeakKeepsWhatTheLargestGatherNeededAcrossGrowingSizes() {
    BufferAllocator allocator = open(LargeBufferCache.UP_TO_PEAK, Duration.ofMinutes(10));
    Random random = new Random(11);
    // {MiB per buffer, 1 if every buffer comes from an idle region}: a gather of a size seen
    // last time reuses every region, a larger one (or a much smaller one) gets fresh regions.
    long[][] gathers = {{6, 0}, {12, 0}, {12, 1}, {24, 0}, {24, 1}, {24, 1}, {12, 0}, {12, 1}};
    for (long[] g : gathers) {
      LargeBufferCache.Stats before = cache.stats();
      gather(allocator, 3, g[0] * MIB, random);
      LargeBufferCache.Stats after = cache.stats();
      String what = g[0] + " MiB after " + before;
      assertEquals(before.reused() + 3 * g[1], after.reused(), what);
      assertEquals(before.allocated() + 3 * (1 - g[1]), after.allocated(), what);
      assertEquals(0, cache.lent().bytes(), "nothing lent between gathers");
      assertTrue(after.idleBytes() <= cache.lent().peakBytes(), "idle within the peak: " + after);
    }
    assertEquals(3 * 24 * MIB, cache.lent().peakBytes(), "the largest gather's regions");
  }

  @Test
  void upToPeakNeverHoldsMoreThanThePeakOrWhatIsLentNow() {
    BufferAllocator allocator = open(LargeBufferCache.UP_TO_PEAK, Duration.ofMinutes(10));
    Random random = new Random(5);
    for (int round = 0; round < 40; round++) {
      long peakBefore = cache.lent().peakBytes();
      int count = 1 + random.nextInt(4);
      List<ArrowBuf> live = new ArrayList<>();
      try {
        for (int i = 0; i < count; i++) {
          live.add(allocator.buffer((4 + random.nextInt(28)) * MIB));
          long held = cache.lent().bytes() + cache.stats().idleBytes();
          assertTrue(
              held <= Math.max(peakBefore, cache.lent().bytes()),
              "round " + round + ": holds " + held + ", peak before " + peakBefore);
        }
      } finally {
        live.forEach(ArrowBuf::close);
      }
      assertTrue(cache.stats().idleBytes() <= cache.lent().peakBytes());
    }
    assertTrue(cache.stats().reused() > 0, cache.stats().toString());
  }

  @Test
  void freshRegionsStartOnAHugePageBoundary() {
    BufferAllocator allocator = open();
    for (long bytes : new long[] {MIN, 5 * MIB + 3, 33 * MIB}) {
      try (ArrowBuf buf = allocator.buffer(bytes)) {
        assertEquals(0, buf.memoryAddress() % LargeBufferCache.REGION_GRANULE, bytes + " bytes");
      }
    }
  }

  @Test
  void argumentsAreChecked() {
    Duration minute = Duration.ofMinutes(1);
    var factory = NettyAllocationManager.FACTORY;
    assertTrue(
        assertThrows(
                IllegalArgumentException.class, () -> new LargeBufferCache(factory, 0, 0, minute))
            .getMessage()
            .contains("minBytes 0"));
    assertTrue(
        assertThrows(
                IllegalArgumentException.class,
                () -> new LargeBufferCache(factory, MIN, -2, minute))
            .getMessage()
            .contains("maxIdleBytes -2"));
    assertTrue(
        assertThrows(
                IllegalArgumentException.class,
                () -> new LargeBufferCache(factory, MIN, 0, Duration.ZERO))
            .getMessage()
            .contains("idleTimeout PT0S"));
  }
}
