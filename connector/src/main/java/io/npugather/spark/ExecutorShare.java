package io.npugather.spark;

import io.npugather.NpuGatherException;
import io.npugather.ResultCode;
import io.npugather.block.LocalBlock;
import io.npugather.spark.output.ExecutorOutput;
import io.npugather.spark.output.GatheredOutput;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BooleanSupplier;
import org.apache.arrow.memory.BufferAllocator;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Where the ranks of one stage attempt that run in this JVM meet to gather one output ({@link
 * ExecutorGroups}): each hands over its partition and task allocator ({@link #contribute}); the
 * leader waits for all of them ({@link #awaitContributions}), gathers and publishes the executor's
 * output ({@link #complete}); the others wait for it ({@link #awaitOutput}). A failure of any of
 * them ({@link #fail}) wakes the others, which fail naming that rank. Every wait is bounded by the
 * run's timeout and ends when the task is killed.
 *
 * <p>Ownership: what a rank contributes belongs to the share, then to the output the leader makes;
 * if the leader fails instead, the share closes it once the leader has stopped using it.
 */
final class ExecutorShare {
  private static final Logger LOG = LoggerFactory.getLogger(ExecutorShare.class);
  private static final Map<String, ExecutorShare> OPEN = new ConcurrentHashMap<>();
  private static final long POLL_MS = 50;

  private final String key;
  private final int[] ranks; // ascending; ranks[0] is the leader
  private final LocalBlock[] blocks;
  private final BufferAllocator[] allocators;
  private final boolean[] arrived; // contributed, or failed before
  private final boolean[] taken; // holds its reference to the output, or gave it back
  private final boolean[] failed;
  private int failedRank = -1;
  private Throwable failure;
  private boolean leaderDone;
  private ExecutorOutput output;

  private ExecutorShare(String key, int[] ranks) {
    this.key = key;
    this.ranks = ranks;
    this.blocks = new LocalBlock[ranks.length];
    this.allocators = new BufferAllocator[ranks.length];
    this.arrived = new boolean[ranks.length];
    this.taken = new boolean[ranks.length];
    this.failed = new boolean[ranks.length];
  }

  /** The share of stage attempt {@code key} whose ranks in this JVM are {@code ranks}. */
  static ExecutorShare join(String key, int[] ranks) {
    ExecutorShare share = OPEN.computeIfAbsent(key, k -> new ExecutorShare(k, ranks.clone()));
    if (!Arrays.equals(share.ranks, ranks)) {
      throw new IllegalStateException(
          "ranks "
              + Arrays.toString(ranks)
              + " of "
              + key
              + " met "
              + Arrays.toString(share.ranks));
    }
    return share;
  }

  private int index(int rank) {
    int i = Arrays.binarySearch(ranks, rank);
    if (i < 0) {
      throw new IllegalArgumentException("rank " + rank + " is not in " + Arrays.toString(ranks));
    }
    return i;
  }

  /** Hands over {@code rank}'s partition and allocator: the share owns them from now on. */
  synchronized void contribute(int rank, LocalBlock block, BufferAllocator allocator) {
    int i = index(rank);
    blocks[i] = block;
    allocators[i] = allocator;
    arrived[i] = true;
    if (leaderDone && output == null) {
      closeContribution(i); // the leader failed: no output will own it
    }
    notifyAll();
    forgetIfSettled();
  }

  /**
   * The leader's wait for every local rank's contribution.
   *
   * @throws NpuGatherException when a local rank failed first, or at the deadline
   */
  synchronized void awaitContributions(
      int leader, long timeoutMs, BooleanSupplier killed, String where) {
    long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
    while (true) {
      throwIfFailed(leader);
      boolean all = true;
      for (boolean a : arrived) {
        all &= a;
      }
      if (all) {
        return;
      }
      waitUntil(deadline, killed, where, "its executor's other ranks to convert their partitions");
    }
  }

  /** Every local rank's partition, in rank order (after {@link #awaitContributions}). */
  synchronized LocalBlock[] blocks() {
    return blocks.clone();
  }

  /** Every local rank's allocator, in rank order (after {@link #awaitContributions}). */
  synchronized List<BufferAllocator> allocators() {
    return new ArrayList<>(Arrays.asList(allocators));
  }

  /** The local ranks, ascending. */
  int[] ranks() {
    return ranks.clone();
  }

  /**
   * The leader publishes the executor's output, made with one reference per local rank; the
   * references of ranks that failed meanwhile are released at once.
   */
  synchronized void complete(ExecutorOutput made) {
    output = made;
    leaderDone = true;
    for (int i = 0; i < ranks.length; i++) {
      if (failed[i]) {
        taken[i] = true;
        made.release();
      }
    }
    notifyAll();
    forgetIfSettled();
  }

  /** The leader's own reference: its output. */
  synchronized GatheredOutput takeOwn(int leader) {
    int i = index(leader);
    taken[i] = true;
    forgetIfSettled();
    return output.view(leader);
  }

  /**
   * A non-leader's wait for the executor's output, then its reference to it.
   *
   * @throws NpuGatherException when the leader or another local rank failed first, or at the
   *     deadline
   */
  synchronized GatheredOutput awaitOutput(
      int rank, long timeoutMs, BooleanSupplier killed, String where) {
    int i = index(rank);
    long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
    while (output == null) {
      throwIfFailed(rank);
      waitUntil(
          deadline, killed, where, "rank " + ranks[0] + " to gather for its executor's ranks");
    }
    taken[i] = true;
    forgetIfSettled();
    return output.view(rank);
  }

  /**
   * Rank {@code rank} failed with {@code cause}: the others wake and fail naming it (the first
   * failure counts). A leader's failure closes what was contributed, which no output will own.
   */
  synchronized void fail(int rank, Throwable cause) {
    int i = index(rank);
    if (failure == null) {
      failure = cause;
      failedRank = rank;
    }
    arrived[i] = true;
    if (output != null && !taken[i]) {
      taken[i] = true;
      output.release();
    }
    if (i == 0 && output == null) {
      leaderDone = true;
      for (int c = 0; c < ranks.length; c++) {
        closeContribution(c);
      }
    }
    failed[i] = true;
    notifyAll();
    forgetIfSettled();
  }

  private void closeContribution(int i) {
    Throwable first = Teardown.closeAll(blocks[i], allocators[i]); // partition, then allocator
    blocks[i] = null;
    allocators[i] = null;
    if (first != null) {
      LOG.warn("allGatherOnNpu: releasing rank {}'s partition failed", ranks[i], first);
    }
  }

  /** Once every rank has arrived and taken its part (or failed), and the leader is done. */
  private void forgetIfSettled() {
    if (!leaderDone) {
      return;
    }
    for (int i = 0; i < ranks.length; i++) {
      if (!arrived[i] || (output != null && !taken[i])) {
        return;
      }
    }
    OPEN.remove(key, this);
  }

  private void throwIfFailed(int reporter) {
    if (failure != null) {
      NpuGatherException e =
          new NpuGatherException(
              ResultCode.REMOTE_ERROR,
              "allGatherOnNpu",
              reporter,
              "rank "
                  + failedRank
                  + ", which shares this executor, failed: "
                  + failure.getMessage());
      e.initCause(failure);
      throw e;
    }
  }

  private void waitUntil(long deadline, BooleanSupplier killed, String where, String what) {
    long left = deadline - System.nanoTime();
    if (killed.getAsBoolean()) {
      throw new NpuGatherException(
          ResultCode.ABORTED, "allGatherOnNpu", ranks[0], where + ": the task was killed");
    }
    if (left <= 0) {
      throw new NpuGatherException(
          ResultCode.TIMEOUT,
          "allGatherOnNpu",
          ranks[0],
          where + ": timed out waiting for " + what + " (" + AllGatherOptions.TIMEOUT + ")");
    }
    try {
      wait(Math.max(1, Math.min(POLL_MS, left / 1_000_000L)));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new NpuGatherException(
          ResultCode.ABORTED, "allGatherOnNpu", ranks[0], where + ": interrupted");
    }
  }
}
