package io.npugather.spark.rendezvous;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.spark.rendezvous.RendezvousException.Reason;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The round state machine alone: no sockets, no Spark; waiters are plain objects. */
class RoundsTest {
  private static final long LONG_MS = 60_000;
  private static final long BOUND_S = 30; // generous: loaded 2-core machines

  /** A rank's waiter that keeps the outcome it was answered with. */
  private static final class Rank extends Rounds.Waiter {
    final AtomicInteger answers = new AtomicInteger();
    final CountDownLatch answered = new CountDownLatch(1);
    volatile Rounds.Outcome outcome;

    Rank(int rank) {
      super(rank);
    }

    Rounds.Outcome awaitOutcome() throws InterruptedException {
      assertTrue(answered.await(BOUND_S, TimeUnit.SECONDS), "rank " + rank + " was not answered");
      return outcome;
    }
  }

  private ScheduledThreadPoolExecutor timer;
  private Rounds<Rank> rounds;

  @BeforeEach
  void start() {
    timer = new ScheduledThreadPoolExecutor(1);
    rounds =
        new Rounds<>(
            timer,
            (waiters, outcome) -> {
              for (Rank w : waiters) {
                w.outcome = outcome;
                w.answers.incrementAndGet();
                w.answered.countDown();
              }
            });
  }

  @AfterEach
  void stop() throws InterruptedException {
    timer.shutdownNow();
    assertTrue(timer.awaitTermination(BOUND_S, TimeUnit.SECONDS));
  }

  private Rounds<Rank>.Registration register(long id, int rankSize) {
    return rounds.register(id, rankSize, new byte[Protocol.SECRET_BYTES], LONG_MS);
  }

  private static void assertRefused(Reason reason, String text, Rounds.Rejection rejection) {
    assertNotNull(rejection, "joined");
    assertEquals(reason, rejection.reason(), rejection.message());
    assertTrue(rejection.message().contains(text), rejection.message());
  }

  /** Rank {@code rank}, joined with its {@link #entry} to round (stage, attempt) of {@code reg}. */
  private Rank joined(
      Rounds<Rank>.Registration reg, int stage, int attempt, long timeoutMs, int rank) {
    Rank waiter = new Rank(rank);
    assertNull(
        rounds.join(reg, stage, attempt, timeoutMs, entry(rank), waiter),
        "rank " + rank + " refused");
    return waiter;
  }

  private static byte[] entry(int rank) {
    return new byte[] {(byte) rank, (byte) (rank * 7)};
  }

  @Test
  void theLastArrivalAnswersEveryRankOnceWithTheSameTableInRankOrder() throws InterruptedException {
    Rounds<Rank>.Registration reg = register(1, 3);
    Rank[] ranks = {new Rank(0), new Rank(1), new Rank(2)};
    for (int r : new int[] {2, 0}) {
      assertNull(rounds.join(reg, 5, 0, LONG_MS, entry(r), ranks[r]));
    }
    assertEquals(1, rounds.openRounds());
    assertEquals(2, rounds.waitingRanks());
    assertEquals(0, ranks[0].answers.get());
    assertNull(rounds.join(reg, 5, 0, LONG_MS, entry(1), ranks[1]));
    for (Rank rank : ranks) {
      Rounds.Outcome outcome = rank.awaitOutcome();
      assertTrue(outcome.isCompleted());
      assertSame(ranks[0].outcome, outcome);
      for (int r = 0; r < 3; r++) {
        assertArrayEquals(entry(r), outcome.table()[r]);
      }
      assertEquals(1, rank.answers.get());
    }
    assertEquals(0, rounds.openRounds());
    assertEquals(0, rounds.waitingRanks());
  }

  @Test
  void aRankMaySendOncePerRoundBeforeAndAfterItCompletes() throws InterruptedException {
    Rounds<Rank>.Registration reg = register(1, 2);
    assertNull(rounds.join(reg, 0, 0, LONG_MS, entry(0), new Rank(0)));
    assertRefused(
        Reason.DUPLICATE_RANK,
        "already sent its entry for this round",
        rounds.join(reg, 0, 0, LONG_MS, entry(0), new Rank(0)));
    Rank one = joined(reg, 0, 0, LONG_MS, 1);
    assertTrue(one.awaitOutcome().isCompleted());
    assertRefused(
        Reason.DUPLICATE_RANK,
        "the round completed",
        rounds.join(reg, 0, 0, LONG_MS, entry(1), new Rank(1)));
  }

  @Test
  void aNewerAttemptFailsTheOlderRoundAndRefusesItsLateRanks() throws InterruptedException {
    Rounds<Rank>.Registration reg = register(1, 2);
    Rank old = joined(reg, 3, 0, LONG_MS, 0);
    assertNull(rounds.join(reg, 3, 1, LONG_MS, entry(1), new Rank(1)));
    assertEquals(
        Rounds.Outcome.failed(Reason.SUPERSEDED, "superseded by attempt 1 of stage 3"),
        old.awaitOutcome());
    assertEquals(
        new Rounds.Rejection(Reason.SUPERSEDED, "stage 3 attempt 0 was superseded by attempt 1"),
        rounds.join(reg, 3, 0, LONG_MS, entry(1), new Rank(1)));
    assertEquals(1, rounds.openRounds());
  }

  @Test
  void theEarliestDeadlineOfTheArrivedRanksFailsTheRoundNamingTheMissingRanks()
      throws InterruptedException {
    Rounds<Rank>.Registration reg = register(1, 4);
    Rank patient = joined(reg, 0, 0, LONG_MS, 0);
    long start = System.nanoTime();
    Rank hurried = joined(reg, 0, 0, 200, 3);
    Rounds.Outcome outcome = patient.awaitOutcome();
    assertTrue(System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(200));
    assertEquals(
        Rounds.Outcome.failed(
            Reason.TIMEOUT,
            "timed out after 200 ms: ranks [1-2] of 4 had not arrived (2 of 4 arrived)"),
        outcome);
    assertSame(outcome, hurried.awaitOutcome());
    assertRefused(
        Reason.TIMEOUT,
        "the round already failed: timed out after 200 ms",
        rounds.join(reg, 0, 0, LONG_MS, entry(1), new Rank(1)));
  }

  @Test
  void aRankThatLeavesFailsTheRoundForTheOthersAtOnce() throws InterruptedException {
    Rounds<Rank>.Registration reg = register(1, 3);
    Rank stays = joined(reg, 0, 0, LONG_MS, 0);
    Rank leaves = joined(reg, 0, 0, LONG_MS, 1);
    rounds.leave(leaves);
    Rounds.Outcome outcome = stays.awaitOutcome();
    assertEquals(Reason.RANK_LEFT, outcome.reason());
    assertTrue(
        outcome.message().startsWith("rank 1 left the round before it completed"),
        outcome.message());
    assertTrue(outcome.message().endsWith("while ranks [2] had not arrived"), outcome.message());
    rounds.leave(leaves); // a second goodbye changes nothing
    rounds.leave(new Rank(2)); // nor does one from a rank that never joined
    assertEquals(1, stays.answers.get());
    assertEquals(0, rounds.openRounds());
  }

  @Test
  void removingARegistrationFailsItsWaitersAndRefusesNewcomers() throws InterruptedException {
    Rounds<Rank>.Registration reg = register(7, 2);
    Rank waiting = joined(reg, 0, 0, LONG_MS, 0);
    rounds.remove(7, Reason.UNKNOWN_REGISTRATION, "gone");
    rounds.remove(7, Reason.UNKNOWN_REGISTRATION, "gone twice");
    assertEquals(
        Rounds.Outcome.failed(Reason.UNKNOWN_REGISTRATION, "gone"), waiting.awaitOutcome());
    assertNull(rounds.registration(7));
    assertEquals(0, rounds.size());
    Rounds.Rejection late = rounds.join(reg, 1, 0, LONG_MS, entry(1), new Rank(1));
    assertEquals(new Rounds.Rejection(Reason.UNKNOWN_REGISTRATION, "gone"), late);
  }

  @Test
  void aTableOverItsLimitFailsTheRoundForEveryRank() throws InterruptedException {
    Rounds<Rank>.Registration reg = register(1, 3);
    byte[] big = new byte[(int) (Protocol.MAX_TABLE_BYTES / 2)];
    Rank first = new Rank(0);
    assertNull(rounds.join(reg, 0, 0, LONG_MS, big, first));
    assertNull(rounds.join(reg, 0, 0, LONG_MS, big, new Rank(1)));
    Rounds.Rejection over = rounds.join(reg, 0, 0, LONG_MS, new byte[1], new Rank(2));
    assertRefused(
        Reason.TOO_LARGE, "the table exceeds the limit of " + Protocol.MAX_TABLE_BYTES, over);
    assertEquals(over.message(), first.awaitOutcome().message());
    assertEquals(Reason.TOO_LARGE, first.outcome.reason());
  }

  @Test
  void withoutATimerARoundThatNeedsADeadlineFailsAsStopped() throws InterruptedException {
    Rounds<Rank>.Registration reg = register(1, 2);
    timer.shutdownNow();
    Rank alone = joined(reg, 0, 0, LONG_MS, 0);
    assertEquals(
        Rounds.Outcome.failed(Reason.UNKNOWN_REGISTRATION, "the rendezvous service stopped"),
        alone.awaitOutcome());
  }

  @Test
  void roundsOfStagesAndRegistrationsAreApart() throws InterruptedException {
    Rounds<Rank>.Registration a = register(1, 2);
    Rounds<Rank>.Registration b = register(2, 1);
    Rank stageOne = joined(a, 1, 0, LONG_MS, 0);
    assertNull(rounds.join(a, 2, 0, LONG_MS, entry(0), new Rank(0)));
    Rank alone = new Rank(0);
    assertNull(rounds.join(b, 1, 0, LONG_MS, entry(9), alone));
    assertEquals(9, alone.awaitOutcome().table()[0][0]);
    assertEquals(2, rounds.openRounds());
    assertEquals(0, stageOne.answers.get());
    assertNotNull(rounds.registration(1));
  }
}
