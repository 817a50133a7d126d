package io.npugather.spark.memory;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Iterator;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import org.apache.arrow.memory.AllocationManager;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.util.MemoryUtil;

/**
 * An Arrow allocation-manager factory that keeps the memory of large buffers for the next
 * allocation of about the same size, instead of returning it to the system.
 *
 * <p>Why: a gather writes its partition and receives its peers' blocks into fresh buffers of tens
 * of MiB. Fresh memory is faulted in page by page on its first write, and on a guest whose free
 * pages go back to the host even its huge pages may be faulted in on the host again: many times the
 * cost of the copy itself. Repeated gathers of about the same size find their buffers already
 * mapped.
 *
 * <p>Contract: a buffer of {@code minBytes} or more gets a region of at least its size, either an
 * idle one (larger by at most an eighth or by 2 MiB, whichever is more; the newest first) or fresh
 * native memory, aligned to and sized in 2 MiB pages and advised for huge pages ({@link
 * HugePages#advise}); its contents are undefined, as with any {@code ArrowBuf} allocation. When
 * Arrow releases the buffer its region becomes idle. Idle regions are freed when they have been
 * idle for {@code idleTimeout}, when keeping one would make the idle bytes exceed the idle limit
 * (the longest idle go first), when a fresh allocation fails, and on {@link #trim()}. The idle
 * limit is {@code maxIdleBytes}, or with {@link #UP_TO_PEAK} the most bytes of regions lent at once
 * so far: the cache then keeps what the largest gather needed, and on a fresh allocation it first
 * frees idle regions (the longest idle first) that would raise the memory it holds, lent and idle,
 * above that peak. Arrow's accounting is unchanged: a buffer counts its requested size, so
 * allocators still close at zero. Smaller buffers are served by the {@code small} factory.
 * Thread-safe.
 */
public final class LargeBufferCache implements AllocationManager.Factory {
  /** Regions are sized in huge pages, so a slightly larger request next time still fits. */
  static final long REGION_GRANULE = 2L << 20;

  /** {@code maxIdleBytes} that keeps idle up to the most bytes of regions lent at once so far. */
  public static final long UP_TO_PEAK = -1;

  private final AllocationManager.Factory small;
  private final long minBytes;
  private final long maxIdleBytes;
  private final long idleTimeoutNanos;

  /** Idle regions, the longest idle first (at most cacheBytes / minBytes of them). */
  private final ArrayDeque<Region> idle = new ArrayDeque<>();

  private long idleBytes;
  private long lentBytes;
  private long peakLentBytes;
  private long reused;
  private long allocated;
  private ScheduledExecutorService reaper;
  private ScheduledFuture<?> reaping;

  /**
   * @param small serves buffers smaller than {@code minBytes}, and {@link #empty()}
   * @param minBytes the smallest buffer served from regions (at least 1)
   * @param maxIdleBytes the most idle bytes kept; 0 frees every region when its buffer is released;
   *     {@link #UP_TO_PEAK}: the most bytes of regions lent at once so far
   * @param idleTimeout how long a region may stay idle (positive)
   */
  public LargeBufferCache(
      AllocationManager.Factory small, long minBytes, long maxIdleBytes, Duration idleTimeout) {
    if (minBytes < 1) {
      throw new IllegalArgumentException("minBytes " + minBytes + "; allowed: 1 or more");
    }
    if (maxIdleBytes < 0 && maxIdleBytes != UP_TO_PEAK) {
      throw new IllegalArgumentException(
          "maxIdleBytes " + maxIdleBytes + "; allowed: 0 or more, or UP_TO_PEAK (-1)");
    }
    if (idleTimeout.isNegative() || idleTimeout.isZero()) {
      throw new IllegalArgumentException("idleTimeout " + idleTimeout + "; allowed: positive");
    }
    this.small = small;
    this.minBytes = minBytes;
    this.maxIdleBytes = maxIdleBytes;
    this.idleTimeoutNanos = idleTimeout.toNanos();
  }

  @Override
  public AllocationManager create(BufferAllocator accountingAllocator, long size) {
    if (size < minBytes) {
      return small.create(accountingAllocator, size);
    }
    return new RegionAllocation(accountingAllocator, size, take(size));
  }

  @Override
  public ArrowBuf empty() {
    return small.empty();
  }

  /** Frees every idle region. */
  public synchronized void trim() {
    while (!idle.isEmpty()) {
      free(pollOldest());
    }
  }

  /** The most idle bytes it keeps, or {@link #UP_TO_PEAK}. */
  public long maxIdleBytes() {
    return maxIdleBytes;
  }

  /** What the cache holds and has done so far. */
  public synchronized Stats stats() {
    return new Stats(idleBytes, idle.size(), reused, allocated);
  }

  /** Bytes of the regions lent to live buffers now, and the most lent at once so far. */
  public synchronized Lent lent() {
    return new Lent(lentBytes, peakLentBytes);
  }

  /**
   * @param idleBytes bytes of the idle regions
   * @param idleRegions the idle regions
   * @param reused buffers served from an idle region so far
   * @param allocated regions allocated fresh so far
   */
  public record Stats(long idleBytes, int idleRegions, long reused, long allocated) {}

  /**
   * @param bytes bytes of the regions lent to live buffers now
   * @param peakBytes the most bytes of regions lent at once so far
   */
  public record Lent(long bytes, long peakBytes) {}

  /** The most idle bytes kept now. */
  private long idleLimit() {
    return maxIdleBytes == UP_TO_PEAK ? peakLentBytes : maxIdleBytes;
  }

  private void lend(long capacity) {
    lentBytes += capacity;
    peakLentBytes = Math.max(peakLentBytes, lentBytes);
  }

  private Region take(long size) {
    synchronized (this) {
      long slack = Math.max(size / 8, REGION_GRANULE);
      Region best = null;
      // The smallest that fits; of equals the newest, most likely still resident.
      for (Iterator<Region> newestFirst = idle.descendingIterator(); newestFirst.hasNext(); ) {
        Region region = newestFirst.next();
        if (region.capacity >= size
            && region.capacity - size <= slack
            && (best == null || region.capacity < best.capacity)) {
          best = region;
        }
      }
      if (best != null) {
        idle.removeLastOccurrence(best);
        idleBytes -= best.capacity;
        reused++;
        lend(best.capacity);
        return best;
      }
    }
    long capacity = (size + REGION_GRANULE - 1) / REGION_GRANULE * REGION_GRANULE;
    synchronized (this) {
      if (maxIdleBytes == UP_TO_PEAK) {
        // Idle regions that do not fit this request must not raise the memory held above the
        // peak that the gathers so far needed (or above what is lent now, if that is more).
        long after = lentBytes + capacity;
        while (!idle.isEmpty() && idleBytes + after > Math.max(peakLentBytes, after)) {
          free(pollOldest());
        }
      }
    }
    // One granule more, so that the region starts on a 2 MiB boundary and is huge pages whole.
    long base;
    try {
      base = MemoryUtil.allocateMemory(capacity + REGION_GRANULE);
    } catch (OutOfMemoryError e) {
      trim(); // the idle regions are the first memory to give up
      base = MemoryUtil.allocateMemory(capacity + REGION_GRANULE);
    }
    long address = (base + REGION_GRANULE - 1) & -REGION_GRANULE;
    try {
      HugePages.advise(address, capacity);
    } catch (RuntimeException | Error e) {
      MemoryUtil.freeMemory(base);
      throw e;
    }
    synchronized (this) {
      allocated++;
      lend(capacity);
    }
    return new Region(base, address, capacity);
  }

  /** Makes a released buffer's region idle, or frees it. */
  private void give(Region region) {
    synchronized (this) {
      lentBytes -= region.capacity;
      long limit = idleLimit();
      if (region.capacity <= limit) {
        while (idleBytes + region.capacity > limit) {
          free(pollOldest());
        }
        region.idleSince = System.nanoTime();
        idle.addLast(region);
        idleBytes += region.capacity;
        scheduleReaping();
        return;
      }
    }
    free(region);
  }

  /** Frees the regions idle for {@code idleTimeout} or longer. */
  private synchronized void expire() {
    long now = System.nanoTime();
    while (!idle.isEmpty() && now - idle.peekFirst().idleSince >= idleTimeoutNanos) {
      free(pollOldest());
    }
    reaping = null;
    scheduleReaping();
  }

  private Region pollOldest() {
    Region oldest = idle.removeFirst();
    idleBytes -= oldest.capacity;
    return oldest;
  }

  /** Schedules the next expiry while regions are idle; the reaper thread is a daemon. */
  private void scheduleReaping() {
    Region oldest = idle.peekFirst();
    if (oldest == null || reaping != null) {
      return;
    }
    if (reaper == null) {
      ScheduledThreadPoolExecutor executor =
          new ScheduledThreadPoolExecutor(
              1,
              r -> {
                Thread t = new Thread(r, "npugather-buffer-cache-reaper");
                t.setDaemon(true);
                return t;
              });
      executor.setKeepAliveTime(1, TimeUnit.SECONDS); // no thread stays while nothing is idle
      executor.allowCoreThreadTimeOut(true);
      reaper = executor;
    }
    long delay = Math.max(0, oldest.idleSince + idleTimeoutNanos - System.nanoTime());
    reaping = reaper.schedule(this::expire, delay, TimeUnit.NANOSECONDS);
  }

  private static void free(Region region) {
    MemoryUtil.freeMemory(region.base);
  }

  /** Native memory owned by the cache, lent to one buffer at a time. */
  private static final class Region {
    final long base; // as allocated, for freeing
    final long address; // base rounded up to a 2 MiB boundary
    final long capacity;
    long idleSince;

    Region(long base, long address, long capacity) {
      this.base = base;
      this.address = address;
      this.capacity = capacity;
    }
  }

  /** One Arrow buffer's memory: a region, given back when Arrow releases the buffer. */
  private final class RegionAllocation extends AllocationManager {
    private final long size;
    private final Region region;

    RegionAllocation(BufferAllocator accountingAllocator, long size, Region region) {
      super(accountingAllocator);
      this.size = size;
      this.region = region;
    }

    @Override
    public long getSize() {
      return size; // what the allocator reserved: the accounting must balance
    }

    @Override
    protected long memoryAddress() {
      return region.address;
    }

    @Override
    protected void release0() {
      give(region);
    }
  }
}
