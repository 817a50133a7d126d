package io.npugather.spark.memory;

import io.npugather.NativeMemory;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.arrow.memory.ArrowBuf;

/**
 * Faults in the pages of a buffer about to be written for the first time, on a daemon thread, a
 * chunk at a time from its start, while the caller goes on to wait for its peers or to write into
 * the buffer ({@link NativeMemory#populatePages}: a touch of each page that changes no byte, so
 * writes into the buffer may run meanwhile). The kernel's zeroing of fresh pages then overlaps the
 * caller's waiting instead of stalling its copy page by page; pages of reused memory are present
 * already and cost a touch.
 *
 * <p>The populating thread holds a reference to the buffer until it ends, so the buffer's memory
 * stays mapped while it is touched, whoever releases the buffer first. {@link #close} stops it at
 * the next chunk and waits for that chunk (bounded, and through interrupts, which it restores).
 */
public final class Prefault implements AutoCloseable {
  /** Bytes populated per call: the stop flag is checked this often. */
  static final long CHUNK_BYTES = 2L << 20;

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

  private Prefault(ArrowBuf buffer, long bytes) {
    if (bytes == 0) {
      work = null;
      return;
    }
    buffer.getReferenceManager().retain();
    long address = buffer.memoryAddress();
    try {
      work =
          THREADS.submit(
              () -> {
                try {
                  populate(address, bytes);
                } finally {
                  buffer.getReferenceManager().release();
                }
              });
    } catch (RuntimeException | Error e) {
      buffer.getReferenceManager().release();
      throw e;
    }
  }

  /**
   * Starts populating the first {@code bytes} of {@code buffer}.
   *
   * @throws IllegalArgumentException if {@code bytes} is negative or more than the buffer holds, or
   *     {@code buffer} is null and {@code bytes} is not 0
   */
  public static Prefault start(ArrowBuf buffer, long bytes) {
    if (bytes < 0
        || (buffer == null && bytes != 0)
        || (buffer != null && bytes > buffer.capacity())) {
      throw new IllegalArgumentException(
          "prefault: bytes "
              + bytes
              + " of a buffer of "
              + (buffer == null ? "none" : buffer.capacity() + " bytes")
              + "; allowed: 0 to the buffer's capacity (0 without a buffer)");
    }
    return new Prefault(buffer, bytes);
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

  /**
   * Stops populating and waits for the chunk in progress, through interrupts (the thread's
   * interrupt status is restored); a failure of it is thrown here. Should the chunk outlast the
   * bound, the buffer stays the populating thread's until it ends.
   */
  @Override
  public void close() {
    stopped = true;
    if (work == null) {
      return;
    }
    boolean interrupted = false;
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(STOP_WAIT_SECONDS);
    try {
      while (true) {
        try {
          work.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
          return;
        } catch (InterruptedException e) {
          interrupted = true;
        } catch (TimeoutException e) {
          return; // the pages are left to the writes
        } catch (ExecutionException e) {
          Throwable cause = e.getCause();
          if (cause instanceof RuntimeException runtime) {
            throw runtime;
          }
          throw new IllegalStateException("populating pages failed", cause);
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
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
