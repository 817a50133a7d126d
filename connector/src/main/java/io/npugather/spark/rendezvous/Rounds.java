package io.npugather.spark.rendezvous;

import io.npugather.spark.rendezvous.RendezvousException.Reason;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.ToIntFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The registrations and their rounds, without sockets or Spark: ranks' entries arriving, each
 * round's deadline, its failure and its verdict.
 *
 * <p>A round is keyed by (registration, stage id, stage attempt). It completes when its last rank
 * arrives, and fails when a newer attempt of its stage starts, when not all ranks arrive within the
 * timeout (the smaller of the registration's and each arrived rank's, counted from that rank's
 * arrival), when a waiting rank leaves, when its table grows past {@link Protocol#MAX_TABLE_BYTES},
 * or when its registration is removed. Every {@link Waiter} of a round that ends is answered
 * exactly once, through the {@link Answerer}, outside every lock.
 *
 * @param <W> the transport's waiter
 */
final class Rounds<W extends Rounds.Waiter> {
  private static final Logger LOG = LoggerFactory.getLogger(Rounds.class);

  /** A rank's place in a round; the transport extends it with the way to reach the rank. */
  abstract static class Waiter {
    final int rank;
    Rounds<?>.Round round; // the round it joined (Rounds' own), guarded by the round's registration

    Waiter(int rank) {
      this.rank = rank;
    }
  }

  /** Delivers the outcome of a round to every rank that joined it; one call per round. */
  interface Answerer<W> {
    void answer(List<W> waiters, Outcome outcome);
  }

  /** A round's verdict: every rank's entry, indexed by rank, or why the round failed. */
  record Outcome(byte[][] table, Reason reason, String message) {
    static Outcome completed(byte[][] table) {
      return new Outcome(table, null, null);
    }

    static Outcome failed(Reason reason, String message) {
      return new Outcome(null, reason, message);
    }

    boolean isCompleted() {
      return table != null;
    }
  }

  /** Why a rank was refused a place in a round. */
  record Rejection(Reason reason, String message) {}

  private final ScheduledExecutorService timer;
  private final Answerer<W> answerer;
  private final ConcurrentHashMap<Long, Registration> registrations = new ConcurrentHashMap<>();

  /**
   * @param timer runs the rounds' deadlines; once it refuses work, rounds that need a deadline fail
   *     as stopped
   * @param answerer how verdicts reach the waiters
   */
  Rounds(ScheduledExecutorService timer, Answerer<W> answerer) {
    this.timer = timer;
    this.answerer = answerer;
  }

  /** A new registration of {@code rankSize} ranks; its rounds wait at most {@code timeoutMs}. */
  Registration register(long id, int rankSize, byte[] secret, long timeoutMs) {
    Registration reg = new Registration(id, rankSize, secret, timeoutMs);
    registrations.put(id, reg);
    return reg;
  }

  /** The registration of this id, or null when it is unknown or removed. */
  Registration registration(long id) {
    return registrations.get(id);
  }

  /** Registrations currently held. */
  int size() {
    return registrations.size();
  }

  /** Removes a registration, failing its open rounds with this reason and message. Idempotent. */
  void remove(long id, Reason reason, String message) {
    Registration reg = registrations.get(id);
    if (reg != null) {
      remove(reg, reason, message);
    }
  }

  /** Removes every registration, failing their open rounds. */
  void removeAll(Reason reason, String message) {
    for (Registration reg : new ArrayList<>(registrations.values())) {
      remove(reg, reason, message);
    }
  }

  private void remove(Registration reg, Reason reason, String message) {
    registrations.remove(reg.id, reg);
    List<Runnable> after = new ArrayList<>();
    synchronized (reg) {
      if (reg.removed) {
        return;
      }
      reg.removed = true;
      reg.removedReason = message;
      for (StageState st : reg.stages.values()) {
        if (st.round != null && st.round.open()) {
          fail(st.round, reason, message, after);
        }
      }
      reg.stages.clear();
    }
    after.forEach(Runnable::run);
  }

  /** Rounds still waiting for ranks. */
  int openRounds() {
    return sumOverOpenRounds(round -> 1);
  }

  /** Ranks waiting in open rounds. */
  int waitingRanks() {
    return sumOverOpenRounds(round -> round.arrived);
  }

  private int sumOverOpenRounds(ToIntFunction<Round> value) {
    int sum = 0;
    for (Registration reg : registrations.values()) {
      synchronized (reg) {
        for (StageState st : reg.stages.values()) {
          if (st.round != null && st.round.open()) {
            sum += value.applyAsInt(st.round);
          }
        }
      }
    }
    return sum;
  }

  /**
   * Places {@code waiter} (rank {@code waiter.rank}, in range for the registration) with its entry
   * in round (stageId, stageAttempt) of {@code reg}; the waiter is answered when the round ends.
   *
   * @param timeoutMs how long this rank waits at most; the round's deadline is the earliest of its
   *     ranks'
   * @return null when the waiter joined, else why it was refused (it will not be answered)
   */
  Rejection join(
      Registration reg, int stageId, int stageAttempt, long timeoutMs, byte[] entry, W waiter) {
    int rank = waiter.rank;
    List<Runnable> after = new ArrayList<>();
    Rejection rejection = null;
    synchronized (reg) {
      if (reg.removed) {
        rejection = new Rejection(Reason.UNKNOWN_REGISTRATION, reg.removedReason);
      } else {
        StageState st = reg.stages.computeIfAbsent(stageId, k -> new StageState());
        if (stageAttempt < st.attempt) {
          rejection =
              new Rejection(
                  Reason.SUPERSEDED,
                  "stage "
                      + stageId
                      + " attempt "
                      + stageAttempt
                      + " was superseded by attempt "
                      + st.attempt);
        } else {
          if (stageAttempt > st.attempt) {
            if (st.round != null && st.round.open()) {
              fail(
                  st.round,
                  Reason.SUPERSEDED,
                  "superseded by attempt " + stageAttempt + " of stage " + stageId,
                  after);
            }
            st.attempt = stageAttempt;
            st.round = new Round(reg, stageId, stageAttempt);
          }
          Round round = st.round;
          if (round.completed) {
            rejection =
                new Rejection(
                    Reason.DUPLICATE_RANK,
                    "rank "
                        + rank
                        + " already sent its entry: the "
                        + "round completed (a rank may send only once per round; a retried task or connection?)");
          } else if (round.failure != null) {
            rejection =
                new Rejection(round.failureReason, "the round already failed: " + round.failure);
          } else if (round.entries[rank] != null) {
            rejection =
                new Rejection(
                    Reason.DUPLICATE_RANK,
                    "rank "
                        + rank
                        + " already sent its entry "
                        + "for this round (a rank may send only once per round; a retried task or connection?)");
          } else if (round.bytes + entry.length > Protocol.MAX_TABLE_BYTES) {
            String msg =
                "the table exceeds the limit of "
                    + Protocol.MAX_TABLE_BYTES
                    + " bytes (rank "
                    + rank
                    + " brought it to "
                    + (round.bytes + entry.length)
                    + " bytes); entries should be small metadata";
            fail(round, Reason.TOO_LARGE, msg, after);
            rejection = new Rejection(Reason.TOO_LARGE, msg);
          } else {
            round.entries[rank] = entry;
            round.waiters.set(rank, waiter);
            round.arrived++;
            round.bytes += entry.length;
            waiter.round = round;
            if (round.arrived == reg.rankSize) {
              complete(round, after);
            } else {
              scheduleDeadline(round, Math.min(timeoutMs, reg.timeoutMs), after);
            }
          }
        }
      }
    }
    after.forEach(Runnable::run);
    return rejection;
  }

  /**
   * Under the registration's lock: moves the round's deadline earlier when this rank asks for less.
   */
  private void scheduleDeadline(Round round, long effectiveMs, List<Runnable> after) {
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(effectiveMs);
    if (round.timeoutTask != null && deadline - round.deadlineNanos >= 0) {
      return;
    }
    round.deadlineNanos = deadline;
    round.deadlineTimeoutMs = effectiveMs;
    if (round.timeoutTask != null) {
      round.timeoutTask.cancel(false);
    }
    try {
      round.timeoutTask =
          timer.schedule(() -> onTimeout(round), effectiveMs, TimeUnit.MILLISECONDS);
    } catch (RejectedExecutionException e) {
      fail(round, Reason.UNKNOWN_REGISTRATION, "the rendezvous service stopped", after);
    }
  }

  /** A rank that joined a round is gone (its task cancelled or failed, its connection broke). */
  @SuppressWarnings("unchecked") // a waiter joins rounds of one Rounds<W> only
  void leave(W waiter) {
    Round round = (Round) waiter.round;
    if (round == null) {
      return;
    }
    List<Runnable> after = new ArrayList<>();
    synchronized (round.reg) {
      if (round.open() && round.waiters.get(waiter.rank) == waiter) {
        List<Integer> missing = round.missing();
        fail(
            round,
            Reason.RANK_LEFT,
            "rank "
                + waiter.rank
                + " left the round before it completed (its task "
                + "was cancelled or failed, or its connection broke) while ranks "
                + Protocol.ranks(missing)
                + " had not arrived",
            after);
      }
    }
    after.forEach(Runnable::run);
  }

  /** Under the registration's lock: the last rank arrived. */
  private void complete(Round round, List<Runnable> after) {
    byte[][] entries = round.entries;
    List<W> waiters = round.waiters;
    round.completed = true;
    round.entries = null;
    round.waiters = null;
    cancelDeadline(round);
    after.add(() -> answerer.answer(waiters, Outcome.completed(entries)));
  }

  /** Under the registration's lock: fails an open round, answering every rank that arrived. */
  private void fail(Round round, Reason reason, String message, List<Runnable> after) {
    List<W> arrived = new ArrayList<>(round.arrived);
    for (W w : round.waiters) {
      if (w != null) {
        arrived.add(w);
      }
    }
    round.failure = message;
    round.failureReason = reason;
    round.entries = null;
    round.waiters = null;
    cancelDeadline(round);
    LOG.info("rendezvous round {} failed: {}", round.name(), message);
    Outcome outcome = Outcome.failed(reason, message);
    after.add(() -> answerer.answer(arrived, outcome));
  }

  private void cancelDeadline(Round round) {
    if (round.timeoutTask != null) {
      round.timeoutTask.cancel(false);
      round.timeoutTask = null;
    }
  }

  private void onTimeout(Round round) {
    List<Runnable> after = new ArrayList<>();
    Registration reg = round.reg;
    synchronized (reg) {
      if (!round.open() || System.nanoTime() - round.deadlineNanos < 0) {
        return; // finished meanwhile, or rescheduled to a different deadline
      }
      List<Integer> missing = round.missing();
      fail(
          round,
          Reason.TIMEOUT,
          "timed out after "
              + round.deadlineTimeoutMs
              + " ms: ranks "
              + Protocol.ranks(missing)
              + " of "
              + reg.rankSize
              + " had not arrived ("
              + round.arrived
              + " of "
              + reg.rankSize
              + " arrived)",
          after);
    }
    after.forEach(Runnable::run);
  }

  /** One execution of a barrier stage: its ranks, secret, timeout and rounds. */
  final class Registration {
    final long id;
    final int rankSize;
    final byte[] secret;
    final long timeoutMs;
    private final Map<Integer, StageState> stages = new HashMap<>(); // guarded by this
    private boolean removed; // guarded by this
    private String removedReason; // guarded by this

    private Registration(long id, int rankSize, byte[] secret, long timeoutMs) {
      this.id = id;
      this.rankSize = rankSize;
      this.secret = secret;
      this.timeoutMs = Math.max(1, timeoutMs);
    }
  }

  /** Per (registration, stage id): the latest attempt and its round (kept after it finishes). */
  private final class StageState {
    int attempt = -1;
    Round round;
  }

  /** One round; every field is guarded by its registration. */
  private final class Round {
    final Registration reg;
    final int stageId;
    final int stageAttempt;
    byte[][] entries; // null once finished
    List<W> waiters; // null once finished
    int arrived;
    long bytes;
    boolean completed;
    String failure;
    Reason failureReason;
    ScheduledFuture<?> timeoutTask;
    long deadlineNanos;
    long deadlineTimeoutMs;

    Round(Registration reg, int stageId, int stageAttempt) {
      this.reg = reg;
      this.stageId = stageId;
      this.stageAttempt = stageAttempt;
      this.entries = new byte[reg.rankSize][];
      this.waiters = new ArrayList<>(Collections.nCopies(reg.rankSize, null));
    }

    boolean open() {
      return !completed && failure == null;
    }

    List<Integer> missing() {
      List<Integer> missing = new ArrayList<>();
      if (entries != null) {
        for (int r = 0; r < entries.length; r++) {
          if (entries[r] == null) {
            missing.add(r);
          }
        }
      }
      return missing;
    }

    String name() {
      return "(registration " + reg.id + ", stage " + stageId + ", attempt " + stageAttempt + ")";
    }
  }
}
