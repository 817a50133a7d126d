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
    List<int[]> outputs = Ranks.values(Ranks.run(Ranks.hostParam(2), OPTIONS, (rank, comm) -> {
      AllGatherOperation op = new AllGatherOperation(
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
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
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
    var outcomes = Ranks.run(Ranks.hostParam(3), OPTIONS, (rank, comm) -> {
      long[] shape = rank == 2 ? new long[] {4, 3} : new long[] {4, 2};
      try (Tensor x = Tensor.allocate(allocator, DType.FLOAT32, shape)) {
        new AllGatherOperation(Ranks.hostParam(3).rank(rank).build())
            .execute(comm, x, allocator).close();
        return "no error";
      }
    });
    assertSameInvalidUsageOnEveryRank(outcomes, "rank 2: float32[4, 3]");
  }

  @Test
  void mismatchedDtypesFailEveryRankWithTheSameClearError() throws Exception {
    var outcomes = Ranks.run(Ranks.hostParam(2), OPTIONS, (rank, comm) -> {
      DType dtype = rank == 0 ? DType.INT32 : DType.FLOAT32;
      try (Tensor x = Tensor.allocate(allocator, dtype, 8)) {
        new AllGatherOperation(Ranks.hostParam(2).rank(rank).build())
            .execute(comm, x, allocator).close();
        return "no error";
      }
    });
    assertSameInvalidUsageOnEveryRank(outcomes, "rank 0: int32[8], rank 1: float32[8]");
  }

  private static void assertSameInvalidUsageOnEveryRank(
      List<Ranks.Outcome<String>> outcomes, String detail) {
    String first = null;
    for (Ranks.Outcome<String> outcome : outcomes) {
      NpuGatherException e = assertInstanceOf(NpuGatherException.class, outcome.error(),
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
    List<Long> mismatches = Ranks.values(Ranks.run(Ranks.hostParam(rankSize), OPTIONS,
        (rank, comm) -> {
          try (Tensor x = Tensor.allocate(allocator, dtype, shape)) {
            int bytes = (int) x.byteSize();
            TestData.fill(x.buffer(), 0, TestData.bytes(seed, rank, bytes));
            AllGatherOperation op = new AllGatherOperation(
                Ranks.hostParam(rankSize).rank(rank).build());
            try (Tensor out = op.execute(comm, x, allocator)) {
              assertArrayEquals(expectedShape, out.shape());
              assertEquals(dtype, out.dtype());
              long wrong = 0;
              for (int r = 0; r < rankSize; r++) {
                long at = TestData.firstMismatch(out.buffer(), (long) r * bytes,
                    TestData.bytes(seed, r, bytes));
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
