package io.npugather.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.DType;
import io.npugather.HalfFloats;
import io.npugather.Tensor;
import io.npugather.spark.testing.Causes;
import io.npugather.spark.testing.GatherLeaks;
import io.npugather.spark.testing.LocalSpark;
import io.npugather.spark.testing.RankMajor;
import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.spark.ExceptionFailure;
import org.apache.spark.SparkException;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.ArrowUtils;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/** {@link NpuGather#onRanks} end to end in Spark local[4], backend host. */
class OnRanksTest {
  private static final int RANKS = 4;

  private static final List<SparkListenerTaskEnd> TASK_ENDS =
      Collections.synchronizedList(new ArrayList<>());

  @RegisterExtension
  static final LocalSpark SPARK =
      LocalSpark.cores(RANKS).shufflePartitions(RANKS).utc().onStart(OnRanksTest::started);

  private static SparkSession spark;
  private static JavaSparkContext jsc;

  private static void started(SparkSession session) {
    spark = session;
    jsc = SPARK.jsc();
    spark
        .sparkContext()
        .addSparkListener(
            new SparkListener() {
              @Override
              public void onTaskEnd(SparkListenerTaskEnd taskEnd) {
                TASK_ENDS.add(taskEnd);
              }
            });
  }

  @AfterEach
  void noArrowMemoryOutstanding() {
    GatherLeaks.awaitArrowReleased();
  }

  /** Returns its rank on every rank but rank 3, which fails as a model shard might. */
  private static final RankFunction<Integer> SHARD_3_FAILS =
      (rank, gathered) -> {
        if (rank == 3) {
          throw new IOException("model shard 3 failed");
        }
        return rank;
      };

  /** What a rank saw: its rank, the gathered tensor's dtype, shape and every element. */
  record Seen(int rank, DType dtype, long[] shape, float[] values, short[] bits, float[] widened)
      implements Serializable {}

  /** Copies the gathered tensor out (float32 values, or 16-bit patterns plus their widening). */
  private static Seen see(int rank, Tensor gathered) {
    int n = (int) gathered.elementCount();
    if (gathered.dtype() == DType.FLOAT32) {
      float[] values = new float[n];
      for (int i = 0; i < n; i++) {
        values[i] = gathered.buffer().getFloat(4L * i);
      }
      return new Seen(rank, gathered.dtype(), gathered.shape(), values, null, null);
    }
    short[] bits = new short[n];
    for (int i = 0; i < n; i++) {
      bits[i] = gathered.buffer().getShort(2L * i);
    }
    float[] widened = new float[n];
    try (BufferAllocator allocator =
            ArrowUtils.rootAllocator().newChildAllocator("widen-" + rank, 0, Long.MAX_VALUE);
        Tensor wide = HalfFloats.toFloat32(gathered, allocator)) {
      assertArrayEquals(gathered.shape(), wide.shape());
      for (int i = 0; i < n; i++) {
        widened[i] = wide.buffer().getFloat(4L * i);
      }
    }
    return new Seen(rank, gathered.dtype(), gathered.shape(), null, bits, widened);
  }

  private static void assertEveryRankSaw(
      List<Seen> seen, DType dtype, long rows, long features, float[] expected) {
    assertEquals(RANKS, seen.size(), "one result per rank");
    for (int r = 0; r < RANKS; r++) {
      Seen s = seen.get(r);
      assertEquals(r, s.rank(), "result " + r + " comes from rank " + r);
      assertEquals(dtype, s.dtype());
      assertArrayEquals(new long[] {RANKS, rows, features}, s.shape(), "shape on rank " + r);
      if (dtype == DType.FLOAT32) {
        RankMajor.assertSameFloats(r, expected, s.values());
      } else {
        assertEquals(expected.length, s.bits().length);
        for (int i = 0; i < expected.length; i++) {
          short want =
              dtype == DType.FLOAT16
                  ? HalfFloats.floatToFloat16Bits(expected[i])
                  : HalfFloats.floatToBFloat16Bits(expected[i]);
          float wide =
              dtype == DType.FLOAT16
                  ? HalfFloats.float16BitsToFloat(want)
                  : HalfFloats.bfloat16BitsToFloat(want);
          assertEquals(want, s.bits()[i], "rank " + r + ", element " + i + " of " + expected[i]);
          assertEquals(Float.floatToRawIntBits(wide), Float.floatToRawIntBits(s.widened()[i]));
        }
      }
    }
  }

  /** {@code rows} rows of an id, a label and float columns f0, f1, ..., in RANKS partitions. */
  private static Dataset<Row> floatColumns(int totalRows, int features, long seed) {
    StructType schema =
        new StructType().add("id", DataTypes.LongType).add("label", DataTypes.StringType);
    for (int f = 0; f < features; f++) {
      schema = schema.add("f" + f, DataTypes.FloatType, false);
    }
    Random random = new Random(seed);
    List<Row> rows = new ArrayList<>();
    for (int i = 0; i < totalRows; i++) {
      Object[] values = new Object[features + 2];
      values[0] = (long) i;
      values[1] = "row" + i;
      for (int f = 0; f < features; f++) {
        values[f + 2] = (float) random.nextGaussian() * 100;
      }
      rows.add(RowFactory.create(values));
    }
    return spark.createDataFrame(jsc.parallelize(rows, RANKS), schema);
  }

  @Test
  void floatColumnsAreGatheredOnEveryRank() {
    Dataset<Row> df = floatColumns(250 * RANKS, 5, 1);
    List<String> columns = List.of("f0", "f1", "f2", "f3", "f4");
    List<Seen> seen = NpuGather.onRanks(df, columns, OnRanksTest::see);
    assertEveryRankSaw(seen, DType.FLOAT32, 250, 5, RankMajor.floats(df, columns));
  }

  @Test
  void numericColumnsOfEveryTypeBecomeFloat32InTheOrderGiven() {
    StructType schema =
        new StructType()
            .add("d", DataTypes.DoubleType)
            .add("i", DataTypes.IntegerType)
            .add("l", DataTypes.LongType)
            .add("s", DataTypes.ShortType)
            .add("b", DataTypes.ByteType)
            .add("f", DataTypes.FloatType)
            .add("text", DataTypes.StringType);
    Random random = new Random(2);
    List<Row> rows = new ArrayList<>();
    for (int i = 0; i < 40 * RANKS; i++) {
      rows.add(
          RowFactory.create(
              random.nextDouble() * 1e6,
              random.nextInt(),
              random.nextLong(),
              (short) random.nextInt(),
              (byte) random.nextInt(),
              random.nextFloat(),
              "x"));
    }
    Dataset<Row> df = spark.createDataFrame(jsc.parallelize(rows, RANKS), schema);
    List<String> columns = List.of("f", "b", "s", "l", "i", "d");
    List<Seen> seen = NpuGather.onRanks(df, columns, OnRanksTest::see);
    assertEveryRankSaw(seen, DType.FLOAT32, 40, 6, RankMajor.floats(df, columns));
  }

  private static Dataset<Row> arrayColumn(int rowsPerRank, int length, long seed) {
    StructType schema =
        new StructType()
            .add("id", DataTypes.IntegerType)
            .add("features", DataTypes.createArrayType(DataTypes.FloatType, false));
    Random random = new Random(seed);
    List<Row> rows = new ArrayList<>();
    for (int i = 0; i < rowsPerRank * RANKS; i++) {
      float[] values = new float[length];
      for (int j = 0; j < length; j++) {
        values[j] = random.nextFloat() * 2 - 1;
      }
      rows.add(RowFactory.create(i, values));
    }
    return spark.createDataFrame(jsc.parallelize(rows, RANKS), schema);
  }

  @Test
  void anArrayColumnGivesOneFeaturePerElement() {
    Dataset<Row> df = arrayColumn(64, 16, 3);
    List<Seen> seen = NpuGather.onRanks(df, List.of("features"), OnRanksTest::see);
    assertEveryRankSaw(seen, DType.FLOAT32, 64, 16, RankMajor.floats(df, List.of("features")));
  }

  /** Values whose float16 and bfloat16 roundings are known. */
  private static final float[] TRICKY = {
    1.0f,
    0.1f,
    (float) Math.PI,
    1.0f + 0x1p-11f,
    1.0f + 3 * 0x1p-11f,
    65504.0f,
    65520.0f,
    0x1p-25f,
    -0x1p-24f,
    1.0f + 0x1p-8f,
    1.0f + 3 * 0x1p-8f,
    Float.MAX_VALUE
  };

  private static final int[] TRICKY_F16 = {
    0x3c00, 0x2e66, 0x4248, 0x3c00, 0x3c02, 0x7bff, 0x7c00, 0x0000, 0x8001, 0x3c04, 0x3c0c, 0x7c00
  };
  private static final int[] TRICKY_BF16 = {
    0x3f80, 0x3dcd, 0x4049, 0x3f80, 0x3f80, 0x4780, 0x4780, 0x3300, 0xb380, 0x3f80, 0x3f82, 0x7f80
  };

  private static Dataset<Row> trickyRows() {
    StructType schema = new StructType();
    for (int f = 0; f < TRICKY.length; f++) {
      schema = schema.add("t" + f, DataTypes.FloatType, false);
    }
    List<Row> rows = new ArrayList<>();
    for (int i = 0; i < 3 * RANKS; i++) {
      Object[] values = new Object[TRICKY.length];
      for (int f = 0; f < TRICKY.length; f++) {
        values[f] = i % 2 == 0 ? TRICKY[f] : -TRICKY[f];
      }
      rows.add(RowFactory.create(values));
    }
    return spark.createDataFrame(jsc.parallelize(rows, RANKS), schema);
  }

  private static List<String> trickyColumns() {
    List<String> columns = new ArrayList<>();
    for (int f = 0; f < TRICKY.length; f++) {
      columns.add("t" + f);
    }
    return columns;
  }

  private void checkWire(DType wire, int[] expectedBits) {
    Dataset<Row> df = trickyRows();
    List<Seen> seen =
        NpuGather.onRanks(df, trickyColumns(), AllGatherOptions.defaults(), wire, OnRanksTest::see);
    assertEveryRankSaw(seen, wire, 3, TRICKY.length, RankMajor.floats(df, trickyColumns()));
    for (Seen s : seen) {
      for (int i = 0; i < s.bits().length; i++) {
        int row = i / TRICKY.length; // = the input row: partition r holds rows 3r .. 3r + 2
        int f = i % TRICKY.length;
        int sign = row % 2 == 0 ? 0 : 0x8000;
        assertEquals(
            Integer.toHexString(expectedBits[f] ^ sign),
            Integer.toHexString(s.bits()[i] & 0xffff),
            wire + " of " + (sign == 0 ? "" : "-") + TRICKY[f] + " on rank " + s.rank());
      }
    }
  }

  @Test
  void float16OnTheWireRoundsToNearestEven() {
    checkWire(DType.FLOAT16, TRICKY_F16);
  }

  @Test
  void bfloat16OnTheWireRoundsToNearestEven() {
    checkWire(DType.BFLOAT16, TRICKY_BF16);
  }

  @Test
  void randomDataThroughBfloat16AndFloat16() {
    Dataset<Row> df = arrayColumn(32, 8, 4);
    float[] expected = RankMajor.floats(df, List.of("features"));
    for (DType wire : List.of(DType.FLOAT16, DType.BFLOAT16)) {
      List<Seen> seen =
          NpuGather.onRanks(
              df, List.of("features"), AllGatherOptions.defaults(), wire, OnRanksTest::see);
      assertEveryRankSaw(seen, wire, 32, 8, expected);
    }
  }

  /** The README's example: bfloat16 on the wire, widened back inside the function. */
  @Test
  void readmeExample() {
    Dataset<Row> df = floatColumns(20 * RANKS, 3, 8);
    List<Double> sums =
        NpuGather.onRanks(
            df,
            List.of("f0", "f1", "f2"),
            AllGatherOptions.defaults(),
            DType.BFLOAT16,
            (rank, gathered) -> {
              try (BufferAllocator a =
                      ArrowUtils.rootAllocator().newChildAllocator("fn", 0, Long.MAX_VALUE);
                  Tensor x = HalfFloats.toFloat32(gathered, a)) {
                double sum = 0;
                for (long i = 0; i < x.elementCount(); i++) {
                  sum += x.buffer().getFloat(4 * i);
                }
                return sum;
              }
            });
    double expected = 0;
    for (float value : RankMajor.floats(df, List.of("f0", "f1", "f2"))) {
      expected += HalfFloats.bfloat16BitsToFloat(HalfFloats.floatToBFloat16Bits(value));
    }
    assertEquals(List.of(expected, expected, expected, expected), sums);
  }

  @Test
  void unequalRowCountsFailEveryRankWithTheSameError() throws Exception {
    // 39 rows in 4 partitions: 9, 10, 10, 10.
    Dataset<Row> uneven = floatColumns(39, 2, 5);
    TASK_ENDS.clear();
    SparkException e =
        assertThrows(
            SparkException.class,
            () ->
                NpuGather.onRanks(uneven, List.of("f0", "f1"), (rank, gathered) -> "unreachable"));
    String text = Causes.messages(e);
    assertTrue(
        text.contains(
            "ranks passed different inputs (rank 0: float32[9, 2], rank 1:"
                + " float32[10, 2], rank 2: float32[10, 2], rank 3: float32[10, 2])"),
        text);
    assertTrue(text.contains("same number of rows"), text);

    // Every rank that reported an error (the others were killed once the first failed)
    // reported this one.
    String marker = "ranks passed different inputs";
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    int stage = -1;
    List<String> errors = new ArrayList<>();
    while (System.nanoTime() < deadline) {
      errors.clear();
      int ended = 0;
      synchronized (TASK_ENDS) {
        for (SparkListenerTaskEnd end : TASK_ENDS) {
          if (stage < 0
              && end.reason() instanceof ExceptionFailure failure
              && failure.description().contains(marker)) {
            stage = end.stageId();
          }
        }
        for (SparkListenerTaskEnd end : TASK_ENDS) {
          if (end.stageId() == stage) {
            ended++;
            if (end.reason() instanceof ExceptionFailure failure) {
              errors.add(failure.description());
            }
          }
        }
      }
      if (ended == RANKS) {
        break;
      }
      Thread.sleep(20);
    }
    assertFalse(errors.isEmpty(), "task ends: " + TASK_ENDS);
    for (String error : errors) {
      assertTrue(error.contains(marker), error);
      String body = error.substring(error.indexOf("ranks passed different inputs"));
      assertEquals(
          text.substring(
              text.indexOf("ranks passed different inputs"),
              text.indexOf("ranks passed different inputs") + body.length()),
          body);
    }
  }

  @Test
  void raggedArraysFailNamingTheRowAndTheLengths() {
    StructType schema =
        new StructType().add("features", DataTypes.createArrayType(DataTypes.FloatType, true));
    List<Row> rows = new ArrayList<>();
    for (int i = 0; i < 8 * RANKS; i++) {
      int length = i == 8 * 2 + 5 ? 3 : 4; // rank 2, row 5
      float[] values = new float[length];
      java.util.Arrays.fill(values, (float) i);
      rows.add(RowFactory.create((Object) values));
    }
    Dataset<Row> df = spark.createDataFrame(jsc.parallelize(rows, RANKS), schema);
    SparkException e =
        assertThrows(
            SparkException.class,
            () -> NpuGather.onRanks(df, List.of("features"), (rank, gathered) -> rank));
    String text = Causes.messages(e);
    assertTrue(text.contains("onRanks rank 2/4"), text);
    assertTrue(
        text.contains(
            "column 'features' has 3 elements in row 5 of this partition but 4"
                + " in row 0; every row of an array<float> column must have the same length"),
        text);
  }

  @Test
  void nullsAndWrongColumnsAreClearErrors() {
    StructType schema =
        new StructType()
            .add("x", DataTypes.FloatType, true)
            .add("s", DataTypes.StringType)
            .add("a", DataTypes.createArrayType(DataTypes.FloatType));
    List<Row> rows = new ArrayList<>();
    for (int i = 0; i < 4 * RANKS; i++) {
      rows.add(RowFactory.create(i == 6 ? null : (float) i, "s", new float[] {1.0f}));
    }
    Dataset<Row> df = spark.createDataFrame(jsc.parallelize(rows, RANKS), schema);
    IllegalArgumentException wrongType =
        assertThrows(
            IllegalArgumentException.class,
            () -> NpuGather.onRanks(df, List.of("x", "s"), (rank, gathered) -> rank));
    assertTrue(wrongType.getMessage().contains("column 's' is string"), wrongType.getMessage());
    IllegalArgumentException arrayPlus =
        assertThrows(
            IllegalArgumentException.class,
            () -> NpuGather.onRanks(df, List.of("x", "a"), (rank, gathered) -> rank));
    assertTrue(
        arrayPlus.getMessage().contains("must be the only selected column"),
        arrayPlus.getMessage());
    assertThrows(
        IllegalArgumentException.class,
        () -> NpuGather.onRanks(df, List.of(), (rank, gathered) -> rank));
    assertThrows(
        IllegalArgumentException.class,
        () ->
            NpuGather.onRanks(
                df,
                List.of("x"),
                AllGatherOptions.defaults(),
                DType.INT32,
                (rank, gathered) -> rank));
    SparkException nulls =
        assertThrows(
            SparkException.class,
            () -> NpuGather.onRanks(df, List.of("x"), (rank, gathered) -> rank));
    assertTrue(Causes.messages(nulls).contains("onRanks rank 1/4 (stage"), Causes.messages(nulls));
    assertTrue(
        Causes.messages(nulls).contains("column 'x' is null in row 2 of this partition"),
        Causes.messages(nulls));
  }

  @Test
  void resultsComeBackByRankAndFunctionErrorsReachTheDriver() {
    Dataset<Row> df = floatColumns(3 * RANKS, 1, 6);
    List<String> results =
        NpuGather.onRanks(
            df, List.of("f0"), (rank, gathered) -> rank == 1 ? null : rank + ":" + gathered);
    assertEquals(
        java.util.Arrays.asList(
            "0:float32[4, 3, 1]", null, "2:float32[4, 3, 1]", "3:float32[4, 3, 1]"),
        results);
    assertNull(results.get(1));
    SparkException e =
        assertThrows(
            SparkException.class, () -> NpuGather.onRanks(df, List.of("f0"), SHARD_3_FAILS));
    assertTrue(Causes.messages(e).contains("model shard 3 failed"), Causes.messages(e));
  }

  @Test
  void aFailedRankFailsTheJobWithAnErrorClassAndTheRanksExceptionAsCause() {
    Dataset<Row> df = floatColumns(3 * RANKS, 1, 7);
    RankFailedException function =
        assertThrows(
            RankFailedException.class, () -> NpuGather.onRanks(df, List.of("f0"), SHARD_3_FAILS));
    assertEquals("NPUGATHER_RANK_FUNCTION_FAILED", function.getCondition());
    assertEquals("39000", function.getSqlState());
    assertEquals(3, function.rank());
    assertEquals(
        Map.of("operation", "onRanks", "rank", "3", "message", function.getCause().getMessage()),
        function.getMessageParameters());
    assertTrue(function.getCause() instanceof RankFunctionException, Causes.messages(function));
    assertEquals("model shard 3 failed", function.getCause().getCause().getMessage());
    assertTrue(
        function.getMessage().startsWith("[NPUGATHER_RANK_FUNCTION_FAILED] onRanks: rank 3 failed:")
            && function.getMessage().endsWith(" SQLSTATE: 39000"),
        function.getMessage());
    // Spark's own words for the job stay with it.
    assertTrue(
        function.getSuppressed()[0].getMessage().contains("barrier task"),
        function.getSuppressed()[0].getMessage());

    RankFailedException injected =
        assertThrows(
            RankFailedException.class,
            () ->
                NpuGather.onRanks(
                    df,
                    List.of("f0"),
                    AllGatherOptions.defaults().with(Map.of("npugather.test.injectFailure", "2")),
                    DType.FLOAT32,
                    (rank, gathered) -> rank));
    assertEquals("NPUGATHER_RANK_FAILED", injected.getCondition());
    assertEquals("58000", injected.getSqlState());
    assertEquals(2, injected.rank());
    assertTrue(
        injected.getCause().getMessage().contains("failure injected"), Causes.messages(injected));

    RankFailedException uneven =
        assertThrows(
            RankFailedException.class,
            () -> NpuGather.onRanks(floatColumns(39, 2, 8), List.of("f0", "f1"), (r, g) -> r));
    assertEquals("NPUGATHER_RANK_INPUT_INVALID", uneven.getCondition());
    assertEquals("22000", uneven.getSqlState());
    assertTrue(
        uneven.getCause().getMessage().contains("ranks passed different inputs"),
        Causes.messages(uneven));
  }
}
