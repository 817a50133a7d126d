package io.npugather.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.npugather.spark.rendezvous.TestTickets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The rank-task skeleton's parts that run without Spark: naming, injected failure, teardown. */
class RankTaskTest {
  private RootAllocator root;

  @BeforeEach
  void open() {
    root = new RootAllocator();
  }

  @AfterEach
  void close() {
    root.close(); // fails the test if a rank's allocator was left open
  }

  private static RankTask ranks(RankTask.Operation operation, int rankSize, String inject) {
    AllGatherOptions options =
        inject.isEmpty()
            ? AllGatherOptions.defaults()
            : AllGatherOptions.defaults().with(Map.of(AllGatherOptions.INJECT_FAILURE, inject));
    return new RankTask(operation, options, null, TestTickets.forRanks(rankSize), "npg-test", null);
  }

  private RankTask.Rank rank(RankTask ranks, int rank, int stageId, int stageAttempt) {
    return ranks
    .new Rank(
        null,
        rank,
        stageId,
        stageAttempt,
        root.newChildAllocator("rank-" + rank, 0, Long.MAX_VALUE));
  }

  @Test
  void errorsAndLogLinesNameTheOperationTheRankAndTheStageAttempt() {
    RankTask.Rank gather = rank(ranks(RankTask.Operation.ALL_GATHER, 4, ""), 1, 7, 2);
    RankTask.Rank onRanks = rank(ranks(RankTask.Operation.ON_RANKS, 2, ""), 0, 3, 0);
    assertEquals("allGatherOnNpu rank 1/4 (stage 7.2)", gather.where());
    assertEquals("onRanks rank 0/2 (stage 3.0)", onRanks.where());
    assertEquals(4, gather.rankSize());
    assertNull(gather.release(null));
    assertNull(onRanks.release(null));
  }

  @Test
  void anInjectedFailureFailsOnlyTheNamedRankInTheNamedAttempt() {
    RankTask ranks = ranks(RankTask.Operation.ALL_GATHER, 4, "2:1");
    List<RankTask.Rank> started = new ArrayList<>();
    for (int attempt = 0; attempt < 2; attempt++) {
      for (int r = 0; r < 4; r++) {
        RankTask.Rank rank = rank(ranks, r, 5, attempt);
        started.add(rank);
        if (r == 2 && attempt == 1) {
          IllegalStateException e = assertThrows(IllegalStateException.class, rank::failIfInjected);
          assertEquals(
              "allGatherOnNpu rank 2/4 (stage 5.1): failure injected by "
                  + AllGatherOptions.INJECT_FAILURE,
              e.getMessage());
        } else {
          assertDoesNotThrow(rank::failIfInjected);
        }
      }
    }
    started.forEach(rank -> assertNull(rank.release(null)));
  }

  @Test
  void releaseClosesWhatTheRankOwnsThenItsAllocatorAndKeepsTheFirstError() {
    RankTask.Rank rank = rank(ranks(RankTask.Operation.ON_RANKS, 2, ""), 0, 1, 0);
    BufferAllocator allocator = rank.allocator();
    ArrowBuf owned = allocator.buffer(64);
    List<String> closed = new ArrayList<>();
    IllegalStateException first = new IllegalStateException("first");
    IllegalStateException second = new IllegalStateException("second");
    Throwable reported =
        rank.release(
            null,
            () -> {
              closed.add("a");
              owned.close(); // before the allocator, which would fail on a leak
              throw first;
            },
            () -> {
              closed.add("b");
              throw second;
            },
            () -> closed.add("c"));
    assertEquals(List.of("a", "b", "c"), closed);
    assertSame(first, reported);
    assertArrayEquals(new Throwable[] {second}, first.getSuppressed());
    assertThrows(IllegalStateException.class, () -> allocator.buffer(1)); // closed last
  }

  @Test
  void releaseAddsTheTeardownsErrorsToTheRanksFailure() {
    RankTask.Rank rank = rank(ranks(RankTask.Operation.ON_RANKS, 2, ""), 1, 1, 0);
    RuntimeException failure = new RuntimeException("the rank function failed");
    IllegalStateException closing = new IllegalStateException("closing");
    assertSame(
        failure,
        rank.release(
            failure,
            () -> {
              throw closing;
            }));
    assertArrayEquals(new Throwable[] {closing}, failure.getSuppressed());
  }

  @Test
  void anAllocatorHandedOverStaysOpenAfterRelease() {
    RankTask.Rank rank = rank(ranks(RankTask.Operation.ALL_GATHER, 2, ""), 0, 1, 0);
    BufferAllocator allocator = rank.handOverAllocator();
    ArrowBuf kept = allocator.buffer(64);
    assertNull(rank.release(null));
    assertEquals(64, allocator.getAllocatedMemory()); // still the new owner's to use
    kept.close();
    allocator.close();
  }
}
