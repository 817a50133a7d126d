package io.npugather.spark.rendezvous;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BooleanSupplier;

/** Test helper: runs ranks of a round on threads. */
final class Ranks implements AutoCloseable {
  static final BooleanSupplier NEVER = () -> false;

  private final ExecutorService pool =
      Executors.newCachedThreadPool(
          r -> {
            Thread t = new Thread(r, "test-rank");
            t.setDaemon(true);
            return t;
          });

  Future<List<byte[]>> exchange(
      RendezvousTicket ticket, int stageId, int attempt, int rank, byte[] entry, Duration timeout) {
    return exchange(ticket, stageId, attempt, rank, entry, timeout, NEVER);
  }

  Future<List<byte[]>> exchange(
      RendezvousTicket ticket,
      int stageId,
      int attempt,
      int rank,
      byte[] entry,
      Duration timeout,
      BooleanSupplier cancelled) {
    return pool.submit(
        () -> RendezvousClient.exchange(ticket, stageId, attempt, rank, entry, timeout, cancelled));
  }

  <T> Future<T> submit(Callable<T> c) {
    return pool.submit(c);
  }

  /**
   * The exchange's failure, or an AssertionError if it succeeded or did not end within the bound.
   */
  static RendezvousException failure(Future<?> f, Duration bound) throws InterruptedException {
    try {
      f.get(bound.toMillis(), TimeUnit.MILLISECONDS);
    } catch (ExecutionException e) {
      if (e.getCause() instanceof RendezvousException) {
        return (RendezvousException) e.getCause();
      }
      throw new AssertionError("unexpected failure", e.getCause());
    } catch (TimeoutException e) {
      throw new AssertionError("exchange did not end within " + bound);
    }
    throw new AssertionError("exchange succeeded but a failure was expected");
  }

  static <T> T result(Future<T> f, Duration bound) throws Exception {
    try {
      return f.get(bound.toMillis(), TimeUnit.MILLISECONDS);
    } catch (ExecutionException e) {
      throw new AssertionError("exchange failed: " + e.getCause(), e.getCause());
    }
  }

  static List<Future<List<byte[]>>> round(
      Ranks ranks, RendezvousTicket ticket, int stageId, int attempt, Duration timeout) {
    List<Future<List<byte[]>>> out = new ArrayList<>();
    for (int r = 0; r < ticket.rankSize(); r++) {
      out.add(ranks.exchange(ticket, stageId, attempt, r, entryOf(r, stageId), timeout));
    }
    return out;
  }

  static byte[] entryOf(int rank, int stageId) {
    return ("rank-" + rank + "-stage-" + stageId).getBytes(java.nio.charset.StandardCharsets.UTF_8);
  }

  /** Polls a condition (no fixed sleeps in assertions): true if it held within the bound. */
  static boolean eventually(Duration bound, BooleanSupplier condition) throws InterruptedException {
    long until = System.nanoTime() + bound.toNanos();
    while (System.nanoTime() - until < 0) {
      if (condition.getAsBoolean()) {
        return true;
      }
      Thread.sleep(20);
    }
    return condition.getAsBoolean();
  }

  @Override
  public void close() {
    pool.shutdownNow();
  }
}
