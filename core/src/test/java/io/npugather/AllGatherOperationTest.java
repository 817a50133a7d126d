package io.npugather;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.ValueSource;

/** The operator's contract, ranks as threads over the host backend. */
class AllGatherOperationTest {
  private static final CommunicatorOptions OPTIONS =
      CommunicatorOptions.defaults().withTimeout(Duration.ofSeconds(20));

  private BufferAllocator allocator;

  @BeforeEach
  void openAllocator() {
    allocator = new RootAllocator();
  }

  @AfterEach
  void closeAllocatorWithNothingOutstanding() {
    allocator.close();
  }

  @Test
  void specExampleGivesTheExactOutputOnBothRanks() throws Exception {
    int[][] inputs = {{16, 56, 5, 96}, {-7, -91, -75, 38}};
    List<int[]> outputs =
        Ranks.values(
            Ranks.run(
                Ranks.hostParam(2),
                OPTIONS,
                (rank, comm) -> {
                  AllGatherOperation op =
                      new AllGatherOperation(
                          Ranks.hostParam(2).rank(rank).communicator(comm).build());
                  try (Tensor x = Tensor.allocate(allocator, DType.INT32, 2, 2)) {
                    for (int i = 0; i < 4; i++) {
                      x.buffer().setInt(4L * i, inputs[rank][i]);
                    }
                    try (Tensor out = op.execute(x, allocator)) {
                      assertArrayEquals(new long[] {2, 2, 2}, out.shape());
                      int[] values = new int[8];
                      for (int i = 0; i < 8; i++) {
                        values[i] = out.buffer().getInt(4L * i);
                      }
                      return values;
                    }
                  }
                }));
    int[] expected = {16, 56, 5, 96, -7, -91, -75, 38};
    for (int[] output : outputs) {
      assertArrayEquals(expected, output);
    }
  }

  @ParameterizedTest
  @EnumSource(DType.class)
  void everyDtypeArrivesByteForByteOnEveryRank(DType dtype) throws Exception {
    checkRandomGather(3, dtype, new long[] {5, 3}, 11);
  }

  @ParameterizedTest
  @ValueSource(ints = {1, 2, 3, 4, 5, 6, 7})
  void inputsOfOneToSevenDimsStackIntoOneMore(int dims) throws Exception {
    long[] shape = new long[dims];
    Arrays.fill(shape, 2);
    shape[0] = 3;
    checkRandomGather(2, DType.FLOAT32, shape, 100 + dims);
  }

  @ParameterizedTest
  @ValueSource(ints = {1, 2, 3, 4, 8})
  void rankSizesOneToEightGatherInRankOrder(int rankSize) throws Exception {
    checkRandomGather(rankSize, DType.INT64, new long[] {1000, 7}, 200 + rankSize);
  }

  @Test
  void emptyFirstDimensionGivesAnEmptyStack() throws Exception {
    checkRandomGather(2, DType.FLOAT16, new long[] {0, 4}, 3);
  }

  @Test
  void eightDimInputIsRejectedBeforeAnyCommunication() {
    AllGatherOperation op = new AllGatherOperation(Ranks.hostParam(2).build());
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class,
            () -> op.inferShape(new long[] {1, 1, 1, 1, 1, 1, 1, 1}));
    assertTrue(e.getMessage().contains("1 to 7 dims"), e.getMessage());
    assertThrows(IllegalArgumentException.class, () -> op.inferShape(new long[0]));
  }

  @Test
  void inferShapePrependsRankSize() {
    AllGatherOperation op = new AllGatherOperation(Ranks.hostParam(4).build());
    assertArrayEquals(new long[] {4, 2, 3}, op.inferShape(new long[] {2, 3}));
  }

  @Test
  void mismatchedShapesFailEveryRankWithTheSameClearError() throws Exception {
    var outcomes =
        Ranks.run(
            Ranks.hostParam(3),
            OPTIONS,
            (rank, comm) -> {
              long[] shape = rank == 2 ? new long[] {4, 3} : new long[] {4, 2};
              try (Tensor x = Tensor.allocate(allocator, DType.FLOAT32, shape)) {
                new AllGatherOperation(Ranks.hostParam(3).rank(rank).build())
                    .execute(comm, x, allocator)
                    .close();
                return "no error";
              }
            });
    assertSameInvalidUsageOnEveryRank(outcomes, "rank 2: float32[4, 3]");
  }

  @Test
  void mismatchedDtypesFailEveryRankWithTheSameClearError() throws Exception {
    var outcomes =
        Ranks.run(
            Ranks.hostParam(2),
            OPTIONS,
            (rank, comm) -> {
              DType dtype = rank == 0 ? DType.INT32 : DType.FLOAT32;
              try (Tensor x = Tensor.allocate(allocator, dtype, 8)) {
                new AllGatherOperation(Ranks.hostParam(2).rank(rank).build())
                    .execute(comm, x, allocator)
                    .close();
                return "no error";
              }
            });
    assertSameInvalidUsageOnEveryRank(outcomes, "rank 0: int32[8], rank 1: float32[8]");
  }

  /** A deliberately long timeout: a failure that arrives must not have waited for it. */
  private static final CommunicatorOptions LONG_TIMEOUT =
      CommunicatorOptions.defaults().withTimeout(Duration.ofSeconds(60));

  /**
   * Runs 3 ranks where rank 1 passes {@code bad} and the others int32[2, 2]; returns the one
   * message every rank failed with, after checking it is the same INVALID_USAGE everywhere and came
   * well before the timeout.
   */
  private String rankOneRejects(
      AllGatherParam.Builder paramOfRankOne, long[] bad, boolean closeFirst) throws Exception {
    long start = System.nanoTime();
    var outcomes =
        Ranks.run(
            Ranks.hostParam(3),
            LONG_TIMEOUT,
            (rank, comm) -> {
              long[] shape = rank == 1 ? bad : new long[] {2, 2};
              AllGatherParam.Builder param = rank == 1 ? paramOfRankOne : Ranks.hostParam(3);
              Tensor x = shape == null ? null : Tensor.allocate(allocator, DType.INT32, shape);
              try {
                if (closeFirst && rank == 1) {
                  x.close();
                }
                new AllGatherOperation(param.rank(rank).build())
                    .execute(comm, x, allocator)
                    .close();
                return "no error";
              } finally {
                if (x != null && x.isOpen()) {
                  x.close();
                }
              }
            });
    long ms = (System.nanoTime() - start) / 1_000_000;
    assertTrue(ms < 30_000, "the failure took " + ms + " ms of a 60 s timeout");
    String first = null;
    for (Ranks.Outcome<String> outcome : outcomes) {
      NpuGatherException e =
          assertInstanceOf(
              NpuGatherException.class,
              outcome.error(),
              "rank " + outcome.rank() + " gave " + outcome.value());
      assertEquals(ResultCode.INVALID_USAGE, e.code(), e.getMessage());
      assertEquals(outcome.rank(), e.rank());
      if (first == null) {
        first = e.getMessage();
      }
      assertEquals(first, e.getMessage(), "rank " + outcome.rank());
    }
    assertTrue(first.contains("rank 1 rejected its"), first);
    return first;
  }

  @Test
  void aRankWhoseInputHasZeroDimsFailsEveryRankAtOnceWithTheSameError() throws Exception {
    String message = rankOneRejects(Ranks.hostParam(3), new long[0], false);
    assertTrue(message.contains("x = int32[] has 0 dims; allowed: 1 to 7 dims"), message);
  }

  @Test
  void aRankWhoseInputHasEightDimsFailsEveryRankAtOnceWithTheSameError() throws Exception {
    String message = rankOneRejects(Ranks.hostParam(3), new long[] {1, 1, 1, 1, 1, 1, 1, 2}, false);
    assertTrue(
        message.contains("x = int32[1, 1, 1, 1, 1, 1, 1, 2] has 8 dims; allowed: 1 to 7"), message);
  }

  @Test
  void aRankPassingNoTensorFailsEveryRankAtOnceWithTheSameError() throws Exception {
    String message = rankOneRejects(Ranks.hostParam(3), null, false);
    assertTrue(message.contains("rank 1 rejected its input: x is null"), message);
  }

  @Test
  void aRankPassingAClosedTensorFailsEveryRankAtOnceWithTheSameError() throws Exception {
    String message = rankOneRejects(Ranks.hostParam(3), new long[] {2, 2}, true);
    assertTrue(message.contains("rank 1 rejected its input: x = int32[2, 2] is closed"), message);
  }

  @Test
  void aRankWhoseParamNamesAnotherRankSizeFailsEveryRankAtOnceWithTheSameError() throws Exception {
    String message = rankOneRejects(Ranks.hostParam(4), new long[] {2, 2}, false);
    assertTrue(
        message.contains(
            "rank 1 rejected its AllGatherParam: rankSize = 4 but the "
                + "communicator has 3 ranks; allowed: 0 or 3"),
        message);
  }

  @Test
  void aRankWhoseOutputCannotBeAllocatedFailsEveryRankAtOnceWithTheSameError() throws Exception {
    long start = System.nanoTime();
    var outcomes =
        Ranks.run(
            Ranks.hostParam(2),
            LONG_TIMEOUT,
            (rank, comm) -> {
              // Rank 1's allocator holds its input but not the 2 x 4 KiB output.
              try (BufferAllocator small =
                      allocator.newChildAllocator(
                          "rank" + rank, 0, rank == 1 ? 4096 + 1024 : Long.MAX_VALUE);
                  Tensor x = Tensor.allocate(small, DType.INT8, 4096)) {
                new AllGatherOperation(Ranks.hostParam(2).rank(rank).build())
                    .execute(comm, x, small)
                    .close();
                return "no error";
              }
            });
    assertTrue((System.nanoTime() - start) / 1_000_000 < 30_000, "waited for the timeout");
    String first = null;
    for (Ranks.Outcome<String> outcome : outcomes) {
      NpuGatherException e =
          assertInstanceOf(
              NpuGatherException.class,
              outcome.error(),
              "rank " + outcome.rank() + " gave " + outcome.value());
      assertEquals(ResultCode.INVALID_USAGE, e.code());
      first = first == null ? e.getMessage() : first;
      assertEquals(first, e.getMessage());
    }
    assertTrue(
        first.contains(
            "rank 1 rejected its input: x = int8[4096]: its output "
                + "int8[2, 4096] could not be allocated"),
        first);
    assertInstanceOf(
        org.apache.arrow.memory.OutOfMemoryException.class,
        outcomes.get(1).error().getCause(),
        "rank 1 keeps its own cause");
  }

  /**
   * User code that fails on one rank between creating its communicator and executing the operator:
   * the communicator closes on the way out, and the other ranks' execute fails within a second
   * (their timeout is 5 s) with REMOTE_ERROR naming that rank.
   */
  @Test
  void aRankThatClosesItsCommunicatorBeforeExecuteFailsTheOthersAtOnce() throws Exception {
    CommunicatorOptions options = CommunicatorOptions.defaults().withTimeout(Duration.ofSeconds(5));
    var outcomes =
        Ranks.run(
            Ranks.hostParam(3),
            options,
            (rank, comm) -> {
              if (rank == 2) {
                throw new IllegalStateException("the user's code failed before execute");
              }
              AllGatherOperation op =
                  new AllGatherOperation(Ranks.hostParam(3).rank(rank).communicator(comm).build());
              try (Tensor x = Tensor.allocate(allocator, DType.FLOAT32, 4, 8)) {
                long start = System.nanoTime();
                NpuGatherException e =
                    assertThrows(NpuGatherException.class, () -> op.execute(x, allocator).close());
                long ms = (System.nanoTime() - start) / 1_000_000;
                assertEquals(ResultCode.REMOTE_ERROR, e.code(), e.getMessage());
                assertTrue(
                    e.getMessage().contains("rank 2 closed its communicator"), e.getMessage());
                assertTrue(ms < 1000, "execute failed after " + ms + " ms: " + e.getMessage());
                return ms;
              }
            });
    assertInstanceOf(IllegalStateException.class, outcomes.get(2).error());
    assertTrue(outcomes.get(0).get() < 1000);
    assertTrue(outcomes.get(1).get() < 1000);
  }

  @Test
  void theCommunicatorStaysUsableAfterARankRejectedItsInput() throws Exception {
    List<String> results =
        Ranks.values(
            Ranks.run(
                Ranks.hostParam(2),
                LONG_TIMEOUT,
                (rank, comm) -> {
                  AllGatherOperation op =
                      new AllGatherOperation(Ranks.hostParam(2).rank(rank).build());
                  try (Tensor bad =
                          Tensor.allocate(
                              allocator, DType.INT32, rank == 0 ? new long[0] : new long[] {3});
                      Tensor good = Tensor.allocate(allocator, DType.INT32, 3)) {
                    NpuGatherException e =
                        assertThrows(
                            NpuGatherException.class, () -> op.execute(comm, bad, allocator));
                    assertTrue(
                        e.getMessage().contains("rank 0 rejected its input"), e.getMessage());
                    good.buffer().setInt(0, 10 + rank);
                    try (Tensor out = op.execute(comm, good, allocator)) {
                      return out.buffer().getInt(0) + "," + out.buffer().getInt(12);
                    }
                  }
                }));
    assertEquals(List.of("10,11", "10,11"), results);
  }

  private static void assertSameInvalidUsageOnEveryRank(
      List<Ranks.Outcome<String>> outcomes, String detail) {
    String first = null;
    for (Ranks.Outcome<String> outcome : outcomes) {
      NpuGatherException e =
          assertInstanceOf(
              NpuGatherException.class,
              outcome.error(),
              "rank " + outcome.rank() + " gave " + outcome.value());
      assertEquals(ResultCode.INVALID_USAGE, e.code());
      assertTrue(e.getMessage().contains(detail), e.getMessage());
      assertTrue(e.getMessage().contains("same shape and dtype"), e.getMessage());
      if (first == null) {
        first = e.getMessage();
      }
      assertEquals(first, e.getMessage());
    }
  }

  /** Every rank gathers random data; every byte of every rank's output is checked. */
  private void checkRandomGather(int rankSize, DType dtype, long[] shape, long seed)
      throws Exception {
    long[] expectedShape = new long[shape.length + 1];
    expectedShape[0] = rankSize;
    System.arraycopy(shape, 0, expectedShape, 1, shape.length);
    List<Long> mismatches =
        Ranks.values(
            Ranks.run(
                Ranks.hostParam(rankSize),
                OPTIONS,
                (rank, comm) -> {
                  try (Tensor x = Tensor.allocate(allocator, dtype, shape)) {
                    int bytes = (int) x.byteSize();
                    TestData.fill(x.buffer(), 0, TestData.bytes(seed, rank, bytes));
                    AllGatherOperation op =
                        new AllGatherOperation(Ranks.hostParam(rankSize).rank(rank).build());
                    try (Tensor out = op.execute(comm, x, allocator)) {
                      assertArrayEquals(expectedShape, out.shape());
                      assertEquals(dtype, out.dtype());
                      long wrong = 0;
                      for (int r = 0; r < rankSize; r++) {
                        long at =
                            TestData.firstMismatch(
                                out.buffer(), (long) r * bytes, TestData.bytes(seed, r, bytes));
                        if (at >= 0) {
                          wrong++;
                        }
                      }
                      return wrong;
                    }
                  }
                }));
    for (int r = 0; r < rankSize; r++) {
      assertEquals(0L, mismatches.get(r), "rank " + r + ": blocks with wrong bytes");
    }
  }
}
