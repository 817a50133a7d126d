package io.npugather.spark;

import io.npugather.Communicator;
import io.npugather.NpuGatherException;
import io.npugather.ResultCode;
import io.npugather.spark.memory.GatherMemory;
import io.npugather.spark.rendezvous.RendezvousException;
import io.npugather.spark.rendezvous.RendezvousTicket;
import java.io.Serializable;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.spark.BarrierTaskContext;

/**
 * What every rank of a run does the same way, whatever it gathers ({@link GatherTask}, {@link
 * OnRanksTask}): its place in the barrier stage, its task allocator, the rendezvous round, the
 * communicator with the injected failure ({@link AllGatherOptions#INJECT_FAILURE}), the timing of
 * its three phases into {@link GatherMetrics}, and one teardown ({@link Teardown}). Made on the
 * driver by {@link RunSetup}, shipped with the tasks; {@link #start} begins a rank in its task.
 */
final class RankTask implements Serializable {
  private static final long serialVersionUID = 1L;

  /** What a run does on its ranks; its name starts every error and log line of a rank. */
  enum Operation {
    ALL_GATHER("allGatherOnNpu", "npugather-rank-"),
    ON_RANKS("onRanks", "npugather-onranks-rank-");

    private final String displayName;
    private final String allocatorPrefix;

    Operation(String displayName, String allocatorPrefix) {
      this.displayName = displayName;
      this.allocatorPrefix = allocatorPrefix;
    }

    @Override
    public String toString() {
      return displayName;
    }
  }

  /**
   * Longest wait of a rank whose failure only reports a peer's for the driver to kill its task
   * ({@link Rank#yieldToPeersFailure}); the kill follows the peer's own failure within a scheduler
   * round trip.
   */
  static final long PEER_FAILURE_GRACE_MS = 15_000;

  private static final long KILL_POLL_MS = 10;

  private final Operation operation;
  private final AllGatherOptions options;
  private final DeviceBinding devices;
  private final RendezvousTicket ticket;
  private final String runDomain;
  private final GatherMetrics metrics;

  RankTask(
      Operation operation,
      AllGatherOptions options,
      DeviceBinding devices,
      RendezvousTicket ticket,
      String runDomain,
      GatherMetrics metrics) {
    this.operation = operation;
    this.options = options;
    this.devices = devices;
    this.ticket = ticket;
    this.runDomain = runDomain;
    this.metrics = metrics;
  }

  AllGatherOptions options() {
    return options;
  }

  GatherMetrics metrics() {
    return metrics;
  }

  /**
   * Begins this task's rank (rank = partition id) with a child allocator of {@link GatherMemory}'s
   * root; the caller releases it with {@link Rank#release}.
   */
  Rank start() {
    BarrierTaskContext context = BarrierTaskContext.get();
    int rank = context.partitionId();
    BufferAllocator allocator =
        GatherMemory.newTaskAllocator(
            operation.allocatorPrefix + rank + "-task-" + context.taskAttemptId());
    return new Rank(context, rank, context.stageId(), context.stageAttemptNumber(), allocator);
  }

  /**
   * One rank in its barrier task. Owns its allocator (until {@link #handOverAllocator}) and its
   * {@link RankGroup}; the phases are timed from its start: conversion until {@link
   * #conversionDone}, rendezvous until {@link #rendezvousDone}, collective until {@link
   * #collectiveDone}.
   */
  final class Rank {
    private final BarrierTaskContext context;
    private final int rank;
    private final int stageId;
    private final int stageAttempt;
    private final String where;
    private final long started = System.nanoTime();
    private long converted;
    private long met;
    private long gathered;
    private BufferAllocator allocator;
    private RankGroup group;

    /** {@code context} may be null where no rendezvous round is run. */
    Rank(
        BarrierTaskContext context,
        int rank,
        int stageId,
        int stageAttempt,
        BufferAllocator allocator) {
      this.context = context;
      this.rank = rank;
      this.stageId = stageId;
      this.stageAttempt = stageAttempt;
      this.where =
          operation
              + " rank "
              + rank
              + "/"
              + ticket.rankSize()
              + " (stage "
              + stageId
              + "."
              + stageAttempt
              + ")";
      this.allocator = allocator;
    }

    int rank() {
      return rank;
    }

    int rankSize() {
      return ticket.rankSize();
    }

    /** "allGatherOnNpu rank 1/4 (stage 3.0)": how errors and log lines name this rank. */
    String where() {
      return where;
    }

    BarrierTaskContext context() {
      return context;
    }

    /** Everything the rank allocates comes from here. */
    BufferAllocator allocator() {
      return allocator;
    }

    void conversionDone() {
      converted = System.nanoTime();
    }

    /** This stage attempt of the run, as no other names itself in any JVM. */
    String attemptKey() {
      return runDomain + "-s" + stageId + "a" + stageAttempt;
    }

    /** The rendezvous round: every rank's entry, {@code payload} carried in this rank's. */
    RankGroup meet(byte[] payload) {
      RankGroup met = RankGroup.meet(context, options, devices, ticket, payload);
      synchronized (this) {
        group = met;
      }
      return met;
    }

    void rendezvousDone() {
      met = System.nanoTime();
    }

    /**
     * The run's communicator over the group {@link #meet} made, its exchange recorded in the
     * metrics; fails here when the options inject a failure into this rank and stage attempt.
     */
    Communicator connect() {
      return connect(rank, ticket.rankSize(), options.rankRoot());
    }

    /**
     * {@link #connect()} as rank {@code commRank} of {@code commSize} ranks with root {@code
     * commRoot} ({@link RankGroup#connect(String, int, int, int)}): the leaders' communicator of
     * ranks that share executors.
     */
    Communicator connect(int commRank, int commSize, int commRoot) {
      Communicator communicator = group.connect(runDomain, commRank, commSize, commRoot);
      joined(communicator.transport());
      return communicator;
    }

    /**
     * Records that this rank's rows travel over {@code transport} (a communicator's, or its
     * executor's leader's) and fails here when the options inject a failure into this rank and
     * stage attempt, as {@link #connect()} does.
     */
    void joined(String transport) {
      recordTransport(transport);
      failIfInjected();
    }

    /** Records that this rank's rows travel over {@code transport}, in the metrics. */
    void recordTransport(String transport) {
      metrics.addRankGroup(group.exchangeNanos(), transport);
    }

    /** As a rank that dies in the collective: its peers see it fail at once. */
    void failIfInjected() {
      if (options.failureInjectedFor(rank, stageAttempt)) {
        throw new IllegalStateException(
            where + ": failure injected by " + AllGatherOptions.INJECT_FAILURE);
      }
    }

    /** Ends the collective phase and records the task's figures with the three phases' times. */
    void collectiveDone(long sent, long received, long rows) {
      gathered = System.nanoTime();
      metrics.addTask(sent, received, rows, converted - started, met - converted, gathered - met);
    }

    /** "conversion 12 ms, rendezvous 3 ms, collective 40 ms", once the collective is done. */
    String timings() {
      return "conversion "
          + (converted - started) / 1_000_000
          + " ms, rendezvous "
          + (met - converted) / 1_000_000
          + " ms, collective "
          + (gathered - met) / 1_000_000
          + " ms";
    }

    /** Closes the communicator once the collective is done; idempotent. */
    synchronized void closeGroup() {
      if (group != null) {
        group.close();
      }
    }

    /** Aborts the communicator after a failure: peers fail at once instead of at the timeout. */
    synchronized void abort() {
      if (group != null) {
        group.abort(); // no-op once closed
      }
    }

    /**
     * Called after {@code failure} (and {@link #abort}): when it only reports a peer's failure (a
     * rank that failed, aborted, closed or left first, {@link #reportsPeersFailure}), waits until
     * the driver kills this task, at most {@link #PEER_FAILURE_GRACE_MS} and never beyond the run's
     * timeout. A barrier stage fails its job with the first task failure the driver hears of: the
     * peer's own, the root cause, reaches it first, and this task then ends as killed rather than
     * failed. Without a kill, {@code failure} stands.
     */
    void yieldToPeersFailure(Throwable failure) {
      if (context == null || !reportsPeersFailure(failure)) {
        return;
      }
      long grace = Math.min(PEER_FAILURE_GRACE_MS, options.timeout().toMillis());
      long deadline = System.nanoTime() + grace * 1_000_000L;
      try {
        while (!context.isInterrupted() && System.nanoTime() - deadline < 0) {
          Thread.sleep(KILL_POLL_MS);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt(); // killed with interruption
      }
    }

    /** The allocator, owned from now on by the caller: {@link #release} leaves it open. */
    synchronized BufferAllocator handOverAllocator() {
      BufferAllocator taken = allocator;
      allocator = null;
      return taken;
    }

    /**
     * Closes the communicator, then {@code owned} in order, then the allocator (which fails on a
     * leak), whatever each throws ({@link Teardown#closeAll}).
     *
     * @return {@code failure}, or without one the first error of the teardown, null if none
     */
    synchronized Throwable release(Throwable failure, AutoCloseable... owned) {
      AutoCloseable[] all = new AutoCloseable[owned.length + 2];
      all[0] = group;
      System.arraycopy(owned, 0, all, 1, owned.length);
      all[all.length - 1] = allocator;
      return Teardown.closeAll(failure, all);
    }
  }

  /**
   * Whether {@code failure} is this rank's report of another rank's failure: a peer that failed,
   * aborted, closed its communicator or exited ({@link ResultCode#REMOTE_ERROR}), or that left the
   * rendezvous round.
   */
  static boolean reportsPeersFailure(Throwable failure) {
    return (failure instanceof NpuGatherException collective
            && collective.code() == ResultCode.REMOTE_ERROR)
        || (failure instanceof RendezvousException round
            && round.reason() == RendezvousException.Reason.RANK_LEFT);
  }
}
