package io.npugather.spark.rendezvous;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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
    rounds = new Rounds<>(timer, (waiters, outcome) -> {
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
    Rounds.Rejection again = rounds.join(reg, 0, 0, LONG_MS, entry(0), new Rank(0));
    assertEquals(Reason.DUPLICATE_RANK, again.reason());
    assertTrue(again.message().contains("already sent its entry for this round"), again.message());
    Rank one = new Rank(1);
    assertNull(rounds.join(reg, 0, 0, LONG_MS, entry(1), one));
    assertTrue(one.awaitOutcome().isCompleted());
    Rounds.Rejection late = rounds.join(reg, 0, 0, LONG_MS, entry(1), new Rank(1));
    assertEquals(Reason.DUPLICATE_RANK, late.reason());
    assertTrue(late.message().contains("the round completed"), late.message());
  }

  @Test
  void aNewerAttemptFailsTheOlderRoundAndRefusesItsLateRanks() throws InterruptedException {
    Rounds<Rank>.Registration reg = register(1, 2);
    Rank old = new Rank(0);
    assertNull(rounds.join(reg, 3, 0, LONG_MS, entry(0), old));
    assertNull(rounds.join(reg, 3, 1, LONG_MS, entry(1), new Rank(1)));
    Rounds.Outcome outcome = old.awaitOutcome();
    assertEquals(Reason.SUPERSEDED, outcome.reason());
    assertEquals("superseded by attempt 1 of stage 3", outcome.message());
    Rounds.Rejection late = rounds.join(reg, 3, 0, LONG_MS, entry(1), new Rank(1));
    assertEquals(Reason.SUPERSEDED, late.reason());
    assertEquals("stage 3 attempt 0 was superseded by attempt 1", late.message());
    assertEquals(1, rounds.openRounds());
  }

  @Test
  void theEarliestDeadlineOfTheArrivedRanksFailsTheRoundNamingTheMissingRanks() throws InterruptedException {
    Rounds<Rank>.Registration reg = register(1, 4);
    Rank patient = new Rank(0);
    Rank hurried = new Rank(3);
    assertNull(rounds.join(reg, 0, 0, LONG_MS, entry(0), patient));
    long start = System.nanoTime();
    assertNull(rounds.join(reg, 0, 0, 200, entry(3), hurried));
    Rounds.Outcome outcome = patient.awaitOutcome();
    assertTrue(System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(200));
    assertEquals(Reason.TIMEOUT, outcome.reason());
    assertEquals("timed out after 200 ms: ranks [1-2] of 4 had not arrived (2 of 4 arrived)", outcome.message());
    assertSame(outcome, hurried.awaitOutcome());
    Rounds.Rejection late = rounds.join(reg, 0, 0, LONG_MS, entry(1), new Rank(1));
    assertEquals(Reason.TIMEOUT, late.reason());
    assertTrue(late.message().startsWith("the round already failed: timed out"), late.message());
  }

  @Test
  void aRankThatLeavesFailsTheRoundForTheOthersAtOnce() throws InterruptedException {
    Rounds<Rank>.Registration reg = register(1, 3);
    Rank stays = new Rank(0);
    Rank leaves = new Rank(1);
    assertNull(rounds.join(reg, 0, 0, LONG_MS, entry(0), stays));
    assertNull(rounds.join(reg, 0, 0, LONG_MS, entry(1), leaves));
    rounds.leave(leaves);
    Rounds.Outcome outcome = stays.awaitOutcome();
    assertEquals(Reason.RANK_LEFT, outcome.reason());
    assertTrue(outcome.message().startsWith("rank 1 left the round before it completed"), outcome.message());
    assertTrue(outcome.message().endsWith("while ranks [2] had not arrived"), outcome.message());
    rounds.leave(leaves); // a second goodbye changes nothing
    rounds.leave(new Rank(2)); // nor does one from a rank that never joined
    assertEquals(1, stays.answers.get());
    assertEquals(0, rounds.openRounds());
  }

  @Test
  void removingARegistrationFailsItsWaitersAndRefusesNewcomers() throws InterruptedException {
    Rounds<Rank>.Registration reg = register(7, 2);
    Rank waiting = new Rank(0);
    assertNull(rounds.join(reg, 0, 0, LONG_MS, entry(0), waiting));
    rounds.remove(7, Reason.UNKNOWN_REGISTRATION, "gone");
    rounds.remove(7, Reason.UNKNOWN_REGISTRATION, "gone twice");
    Rounds.Outcome outcome = waiting.awaitOutcome();
    assertEquals(Reason.UNKNOWN_REGISTRATION, outcome.reason());
    assertEquals("gone", outcome.message());
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
    assertEquals(Reason.TOO_LARGE, over.reason());
    assertEquals(over.message(), first.awaitOutcome().message());
    assertEquals(Reason.TOO_LARGE, first.outcome.reason());
  }

  @Test
  void withoutATimerARoundThatNeedsADeadlineFailsAsStopped() throws InterruptedException {
    Rounds<Rank>.Registration reg = register(1, 2);
    timer.shutdownNow();
    Rank alone = new Rank(0);
    assertNull(rounds.join(reg, 0, 0, LONG_MS, entry(0), alone));
    Rounds.Outcome outcome = alone.awaitOutcome();
    assertFalse(outcome.isCompleted());
    assertEquals(Reason.UNKNOWN_REGISTRATION, outcome.reason());
    assertEquals("the rendezvous service stopped", outcome.message());
  }

  @Test
  void roundsOfStagesAndRegistrationsAreApart() throws InterruptedException {
    Rounds<Rank>.Registration a = register(1, 2);
    Rounds<Rank>.Registration b = register(2, 1);
    Rank stageOne = new Rank(0);
    assertNull(rounds.join(a, 1, 0, LONG_MS, entry(0), stageOne));
    assertNull(rounds.join(a, 2, 0, LONG_MS, entry(0), new Rank(0)));
    Rank alone = new Rank(0);
    assertNull(rounds.join(b, 1, 0, LONG_MS, entry(9), alone));
    assertEquals(9, alone.awaitOutcome().table()[0][0]);
    assertEquals(2, rounds.openRounds());
    assertEquals(0, stageOne.answers.get());
    assertNotNull(rounds.registration(1));
  }
}
