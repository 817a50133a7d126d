package io.npugather.spark.memory;

import io.npugather.NativeMemory;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Faults in the pages of a buffer about to be written for the first time, on a daemon thread, a
 * chunk at a time from its start, while the caller goes on to wait for its peers or to write into
 * the buffer ({@link NativeMemory#populatePages}: present pages are left as they are, so writes
 * into the buffer may run meanwhile; no byte is changed). The kernel's zeroing of fresh pages then
 * overlaps the caller's waiting instead of stalling its copy page by page; pages of reused memory
 * are present already and cost a page-table walk.
 *
 * <p>{@link #close} stops it at the next chunk and waits for that chunk (bounded). Populating never
 * changes memory, so even a buffer freed meanwhile would come to no harm.
 */
public final class Prefault implements AutoCloseable {
  /** Bytes populated per call: the stop flag is checked this often. */
  static final long CHUNK_BYTES = 8L << 20;

  /** How long {@link #close} waits for the chunk in progress. */
  private static final long STOP_WAIT_SECONDS = 10;

  private static final ExecutorService THREADS =
      Executors.newCachedThreadPool(
          r -> {
            Thread t = new Thread(r, "npugather-prefault");
            t.setDaemon(true);
            return t;
          });

  private final AtomicLong populated = new AtomicLong();
  private volatile boolean stopped;
  private final Future<?> work;

  private Prefault(long address, long bytes) {
    work = bytes == 0 ? null : THREADS.submit(() -> populate(address, bytes));
  }

  /**
   * Starts populating {@code bytes} at {@code address}.
   *
   * @throws IllegalArgumentException if {@code bytes} is negative, or {@code address} is 0 and
   *     {@code bytes} is not
   */
  public static Prefault start(long address, long bytes) {
    if (bytes < 0 || (address == 0 && bytes != 0)) {
      throw new IllegalArgumentException(
          "prefault: address "
              + address
              + ", bytes "
              + bytes
              + "; allowed: bytes >= 0 at a non-zero address (0 bytes: any address)");
    }
    return new Prefault(address, bytes);
  }

  private void populate(long address, long bytes) {
    for (long done = 0; done < bytes && !stopped; ) {
      long chunk = Math.min(CHUNK_BYTES, bytes - done);
      NativeMemory.populatePages(address + done, chunk);
      done += chunk;
      populated.set(done);
    }
  }

  /** Bytes populated so far, from the start of the buffer. */
  public long populatedBytes() {
    return populated.get();
  }

  /** Stops populating and waits for the chunk in progress; a failure of it is thrown here. */
  @Override
  public void close() {
    stopped = true;
    if (work == null) {
      return;
    }
    try {
      work.get(STOP_WAIT_SECONDS, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (TimeoutException e) {
      // Harmless: populating never changes memory. The pages are left to the writes.
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      if (cause instanceof RuntimeException runtime) {
        throw runtime;
      }
      throw new IllegalStateException("populating pages failed", cause);
    }
  }

  /** Waits until every page is populated (for tests and benchmarks); false on timeout. */
  boolean awaitDone(long timeoutMillis) throws InterruptedException {
    if (work == null) {
      return true;
    }
    try {
      work.get(timeoutMillis, TimeUnit.MILLISECONDS);
      return true;
    } catch (TimeoutException e) {
      return false;
    } catch (ExecutionException e) {
      throw new IllegalStateException("populating pages failed", e.getCause());
    }
  }
}
