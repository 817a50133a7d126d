package io.npugather.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.spark.memory.GatherMemory;
import io.npugather.spark.testing.Causes;
import io.npugather.spark.testing.GatherLeaks;
import io.npugather.spark.testing.LocalSpark;
import io.npugather.spark.testing.RankMajor;
import io.npugather.spark.testing.ReaderMemory;
import java.math.BigDecimal;
import java.sql.Date;
import java.sql.Timestamp;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.spark.SparkException;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import scala.jdk.javaapi.CollectionConverters;

/** allGatherOnNpu end to end in Spark local[4], backend host. */
class NpuGatherTest {
  @RegisterExtension
  static final LocalSpark SPARK =
      LocalSpark.cores(4).shufflePartitions(4).utc().onStart(NpuGatherTest::started);

  private static SparkSession spark;
  private static JavaSparkContext jsc;

  private static void started(SparkSession session) {
    spark = session;
    jsc = SPARK.jsc();
  }

  @AfterEach
  void nothingLeftInArrowOrSharedMemory() {
    GatherLeaks.awaitArrowReleased();
    assertEquals(List.of(), GatherLeaks.sharedMemoryObjects(".npg-"));
  }

  @Test
  void specExampleThroughADataFrame() {
    StructType schema =
        new StructType().add("a", DataTypes.IntegerType).add("b", DataTypes.IntegerType);
    List<Row> rows =
        List.of(
            RowFactory.create(16, 56),
            RowFactory.create(5, 96),
            RowFactory.create(-7, -91),
            RowFactory.create(-75, 38));
    Dataset<Row> df = spark.createDataFrame(jsc.parallelize(rows, 2), schema);
    Dataset<Row> out = NpuGather.allGatherOnNpu(df);
    assertEquals("source_rank", out.schema().fields()[0].name());
    List<List<Row>> partitions = out.javaRDD().glom().collect();
    assertEquals(2, partitions.size());
    List<Row> expected =
        List.of(
            RowFactory.create(0, 16, 56),
            RowFactory.create(0, 5, 96),
            RowFactory.create(1, -7, -91),
            RowFactory.create(1, -75, 38));
    assertEquals(expected, partitions.get(0));
    assertEquals(expected, partitions.get(1));
  }

  @Test
  void everySupportedTypeWithNullsArrivesRowByRowOnEveryPartition() {
    StructType schema =
        new StructType(
            new StructField[] {
              DataTypes.createStructField("id", DataTypes.LongType, false),
              DataTypes.createStructField("flag", DataTypes.BooleanType, true),
              DataTypes.createStructField("b", DataTypes.ByteType, true),
              DataTypes.createStructField("s", DataTypes.ShortType, true),
              DataTypes.createStructField("i", DataTypes.IntegerType, true),
              DataTypes.createStructField("f", DataTypes.FloatType, true),
              DataTypes.createStructField("d", DataTypes.DoubleType, true),
              DataTypes.createStructField("dec", DataTypes.createDecimalType(12, 3), true),
              DataTypes.createStructField("str", DataTypes.StringType, true),
              DataTypes.createStructField("bin", DataTypes.BinaryType, true),
              DataTypes.createStructField("date", DataTypes.DateType, true),
              DataTypes.createStructField("ts", DataTypes.TimestampType, true),
              DataTypes.createStructField("ts_ntz", DataTypes.TimestampNTZType, true),
              DataTypes.createStructField(
                  "features", DataTypes.createArrayType(DataTypes.FloatType, true), true),
              DataTypes.createStructField(
                  "point",
                  new StructType()
                      .add("x", DataTypes.DoubleType)
                      .add("tags", DataTypes.createArrayType(DataTypes.StringType)),
                  true),
              DataTypes.createStructField(
                  "attrs",
                  DataTypes.createMapType(DataTypes.StringType, DataTypes.IntegerType),
                  true)
            });
    Random random = new Random(7);
    List<Row> rows = new ArrayList<>();
    for (int n = 0; n < 500; n++) {
      rows.add(
          RowFactory.create(
              (long) n,
              maybe(random, random.nextBoolean()),
              maybe(random, (byte) random.nextInt()),
              maybe(random, (short) random.nextInt()),
              maybe(random, random.nextInt()),
              maybe(random, random.nextFloat()),
              maybe(random, random.nextDouble()),
              maybe(random, BigDecimal.valueOf(random.nextInt(1_000_000), 3)),
              maybe(random, "s" + random.nextInt(1000) + "é"),
              maybe(random, new byte[] {(byte) n, 1, 2}),
              maybe(random, Date.valueOf("2024-01-" + (1 + n % 28))),
              maybe(random, new Timestamp(1_700_000_000_000L + n * 1000L)),
              maybe(random, LocalDateTime.of(2024, 5, 1, 12, 0).plusSeconds(n)),
              maybe(random, scalaSeq(random.nextFloat(), null, random.nextFloat())),
              maybe(random, RowFactory.create(random.nextDouble(), scalaSeq("a", null))),
              maybe(random, scalaMap(Map.of("k" + n, n)))));
    }
    Dataset<Row> df = spark.createDataFrame(jsc.parallelize(rows, 3), schema);
    Dataset<Row> gathered = NpuGather.allGatherOnNpu(df);
    RankMajor.assertOnEveryPartition(df, gathered);
    // Written from the rows, not from the batches of a RowToColumnar Spark puts in between.
    assertEquals("rows", GatherMetrics.of(gathered).input());
  }

  @Test
  void emptyAndSkewedPartitionsWork() {
    StructType schema =
        new StructType().add("id", DataTypes.LongType).add("v", DataTypes.StringType);
    List<Row> rows = new ArrayList<>();
    for (long n = 0; n < 20_000; n++) {
      rows.add(RowFactory.create(n, n % 5 == 0 ? null : "v" + n));
    }
    // One row, 20000 rows, nothing; the union also needs a stage boundary before the barrier.
    Dataset<Row> skewed =
        spark.createDataFrame(
            jsc.parallelize(List.of(RowFactory.create(1L, "x")), 1)
                .union(jsc.parallelize(rows, 1))
                .union(jsc.parallelize(new ArrayList<Row>(), 1)),
            schema);
    RankMajor.assertOnEveryPartition(skewed, NpuGather.allGatherOnNpu(skewed));
  }

  @Test
  void onePartitionGathersItself() {
    Dataset<Row> df = spark.range(0, 100, 1, 1).toDF();
    RankMajor.assertOnEveryPartition(df, NpuGather.allGatherOnNpu(df));
  }

  @Test
  void rankIsThePartitionIdAndColumnarInputWorks() {
    // A range is produced by whole-stage codegen; a cached DataFrame is read columnar.
    Dataset<Row> df = spark.range(0, 40_000, 1, 4).selectExpr("id", "cast(id as float) as f");
    df.cache().count();
    try {
      Dataset<Row> out = NpuGather.allGatherOnNpu(df);
      RankMajor.assertOnEveryPartition(df, out);
      GatherMetrics metrics = GatherMetrics.of(out);
      assertEquals(4L * 40_000, metrics.rowsGathered());
      // The 4 ranks share one executor: they gather one output there, receiving nothing.
      assertEquals(0L, metrics.bytesReceived(), metrics.toString());
    } finally {
      df.unpersist(true);
    }
  }

  @Test
  void cachedColumnsAreReadFromTheCachedBytesWithNullsCompressionAndSkew() {
    // Partition 0: one row, partition 1: none, partition 2: 3000. Columns that Spark's cache
    // stores run-length, dictionary or delta encoded, plain, with and without nulls.
    Dataset<Row> df =
        spark
            .range(0, 9000, 1, 3)
            .where("id = 0 or id >= 6000")
            .selectExpr(
                "id",
                "case when id % 7 = 0 then null else id % 3 = 0 end as flag",
                "case when id % 5 = 0 then null else cast(id % 100 as byte) end as b",
                "cast(id % 300 as short) as s",
                "cast(id / 100 as int) as runs",
                "cast(id % 5 as int) as dict",
                "case when id % 13 = 0 then null else id * 1000 end as l",
                "cast(id as float) / 3 as f",
                "case when id % 11 = 0 then null else cast(id as double) * 1.5 end as d");
    df.cache().count();
    try {
      Dataset<Row> gathered = NpuGather.allGatherOnNpu(df);
      RankMajor.assertOnEveryPartition(df, gathered);
      assertEquals("cached batches", GatherMetrics.of(gathered).input());
      // A subset of the cached columns, in another order.
      Dataset<Row> some = df.select("f", "id", "dict");
      Dataset<Row> someGathered = NpuGather.allGatherOnNpu(some);
      RankMajor.assertOnEveryPartition(some, someGathered);
      assertEquals("cached batches", GatherMetrics.of(someGathered).input());
    } finally {
      df.unpersist(true);
    }
  }

  @Test
  void cachedArrayColumnsAreReadFromTheCachedBytesAcrossBatches() {
    // Partition 0: one row, partition 1: none, partition 2: 3000 rows in several cached batches.
    // Null arrays, empty arrays, null elements, arrays longer than one null-bitset word.
    spark.conf().set("spark.sql.inMemoryColumnarStorage.batchSize", "700");
    Dataset<Row> df =
        spark
            .range(0, 9000, 1, 3)
            .where("id = 0 or id >= 6000")
            .selectExpr(
                "id",
                "case when id % 7 = 0 then null when id % 5 = 0 then cast(array() as array<float>) "
                    + "else transform(sequence(0, cast(id % 90 as int)), k -> case when k = 3 and "
                    + "id % 2 = 0 then null else cast(id * k as float) / 3 end) end as v",
                "array(cast(id as double) * 1.5, -0.0d) as pair",
                "case when id % 3 = 0 then null else array(cast(id as short), null) end as s");
    df.cache().count();
    spark.conf().unset("spark.sql.inMemoryColumnarStorage.batchSize");
    try {
      Dataset<Row> gathered = NpuGather.allGatherOnNpu(df);
      RankMajor.assertOnEveryPartition(df, gathered);
      assertEquals("cached batches", GatherMetrics.of(gathered).input());
      Dataset<Row> vectors = df.select("v");
      Dataset<Row> vectorsGathered = NpuGather.allGatherOnNpu(vectors);
      RankMajor.assertOnEveryPartition(vectors, vectorsGathered);
      assertEquals("cached batches", GatherMetrics.of(vectorsGathered).input());
    } finally {
      df.unpersist(true);
    }
  }

  @Test
  void rowConsumersReadRowsWrittenStraightFromTheGatheredBuffers() {
    Dataset<Row> df =
        spark
            .range(0, 3000, 1, 3)
            .selectExpr(
                "id",
                "case when id % 4 = 0 then null else cast(id as float) / 3 end as f",
                "case when id % 5 = 0 then null else transform(sequence(0, cast(id % 9 as int)), "
                    + "k -> cast(id * k as float)) end as v");
    Dataset<Row> out = NpuGather.allGatherOnNpu(df);
    // Fixed-width columns and arrays of them: no ColumnarToRow, the gather itself writes rows.
    String plan = out.queryExecution().executedPlan().toString();
    assertTrue(plan.startsWith("NpuAllGather"), plan);
    RankMajor.assertOnEveryPartition(df, out);
    // A row operator downstream (a generated filter and projection) reads those rows.
    Dataset<Row> picked = out.where("id % 2 = 1").selectExpr("source_rank", "id * 2 as twice", "v");
    List<Row> rows = picked.collectAsList();
    assertEquals(3 * 1500, rows.size(), "every odd id on each of the 3 output partitions");
    for (Row r : rows) {
      long id = r.getLong(1) / 2;
      assertEquals(id / 1000, r.getInt(0), "rank " + r.getInt(0) + " sent id " + id);
      List<Object> v = r.isNullAt(2) ? null : r.getList(2);
      assertEquals(id % 5 == 0 ? null : (int) (id % 9) + 1, v == null ? null : v.size());
      for (int k = 0; v != null && k < v.size(); k++) {
        assertEquals((float) (id * k), (Float) v.get(k), "v[" + k + "] of id " + id);
      }
    }
    // A string column: Spark's ColumnarToRow reads the gathered batches.
    Dataset<Row> withText = df.selectExpr("id", "cast(id as string) as s");
    Dataset<Row> textOut = NpuGather.allGatherOnNpu(withText);
    assertTrue(
        textOut.queryExecution().executedPlan().toString().contains("ColumnarToRow"),
        textOut.queryExecution().executedPlan().toString());
    RankMajor.assertOnEveryPartition(withText, textOut);
  }

  /** Per output partition: its row count and the sum of its rows' hashes. */
  private static Map<Integer, List<Long>> countAndHashSum(Dataset<Row> rows) {
    Map<Integer, List<Long>> result = new HashMap<>();
    for (Row r :
        rows.selectExpr("spark_partition_id() as p", "cast(hash(*) as bigint) as h")
            .groupBy("p")
            .agg(functions.count("h"), functions.sum("h"))
            .collectAsList()) {
      result.put(r.getInt(0), List.of(r.getLong(1), r.getLong(2)));
    }
    return result;
  }

  @Test
  void repeatedGathersReuseTheirLargeBuffersAndLeaveNoStaleByte() {
    // Cached feature vectors with null rows and null elements: the element buffers (6 MB per
    // rank) and the receive buffers are large, and the second gather gets the first one's
    // memory back, still holding the first gather's (other) values.
    String vector =
        "case when id %% 7 = 0 then null else transform(sequence(0, 15), k -> case"
            + " when (id + k) %% 11 = 0 then null else cast(xxhash64(id, k, %d) as float) end) end";
    Dataset<Row> first =
        spark.range(0, 400_000, 1, 4).selectExpr("id", String.format(vector, 1) + " as v").cache();
    Dataset<Row> second =
        spark
            .range(0, 400_000, 1, 4)
            .selectExpr("id * 3 as id", String.format(vector, 2) + " as v")
            .cache();
    try {
      first.count();
      second.count();
      NpuGather.allGatherOnNpu(first).foreach(row -> {});
      GatherLeaks.awaitArrowReleased(); // the first gather's output goes back to the cache
      long reusedBefore = GatherMemory.cache().stats().reused();
      Dataset<Row> out = NpuGather.allGatherOnNpu(second);

      Map<Integer, List<Long>> got = countAndHashSum(out);
      assertTrue(
          GatherMemory.cache().stats().reused() > reusedBefore,
          GatherMemory.cache().stats().toString());
      List<Long> all =
          countAndHashSum(second.selectExpr("spark_partition_id() as source_rank", "*").coalesce(1))
              .get(0);
      assertEquals(Map.of(0, all, 1, all, 2, all, 3, all), got);
    } finally {
      first.unpersist(true);
      second.unpersist(true);
    }
  }

  @Test
  void vectorizedParquetIsGatheredFromItsBatchesNotThroughRows() throws Exception {
    java.nio.file.Path dir = java.nio.file.Files.createTempDirectory("npugather-parquet");
    try {
      spark
          .range(0, 3000, 1, 2)
          .selectExpr(
              "id",
              "cast(id as float) / 7 as f",
              "case when id % 9 = 0 then null else cast(id as int) end as i")
          .write()
          .mode("overwrite")
          .parquet(dir.toString());
      // One file per partition.
      spark.conf().set("spark.sql.files.openCostInBytes", String.valueOf(1L << 30));
      Dataset<Row> df = spark.read().parquet(dir.toString());
      assertEquals(2, df.javaRDD().getNumPartitions());
      Dataset<Row> gathered = NpuGather.allGatherOnNpu(df);
      RankMajor.assertOnEveryPartition(df, gathered);
      assertEquals("columnar batches", GatherMetrics.of(gathered).input());
    } finally {
      spark.conf().unset("spark.sql.files.openCostInBytes");
      try (var files = java.nio.file.Files.walk(dir)) {
        files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
  }

  @Test
  void peakOffHeapIsTheOwnPartitionPlusTheGatheredPeersAndNoMore() {
    Dataset<Row> df =
        spark
            .range(0, 400_000, 1, 4)
            .selectExpr("id", "cast(id as double) as d", "cast(id as string) as s");
    Dataset<Row> gathered = NpuGather.allGatherOnNpu(df);
    gathered.foreach(row -> {});
    GatherMetrics m = GatherMetrics.of(gathered);
    // Per rank: its Arrow partition, the receive buffer of the peers' blocks, and the transient
    // growth of Arrow's vectors while the rows are written (at most one extra partition).
    long bound = 2 * m.ownPartitionBytes() + m.bytesReceived();
    assertTrue(m.peakOffHeapBytes() <= bound, m.toString());
    assertTrue(m.peakOffHeapBytes() >= m.ownPartitionBytes() + m.bytesReceived(), m.toString());
    System.out.println("allGatherOnNpu memory, 4 ranks x 100000 rows: " + m);
  }

  @Test
  void gatheredBatchesHandEveryRankTheGatheredColumnsWhole() {
    Dataset<Row> df =
        spark
            .range(0, 4000, 1, 4)
            .selectExpr(
                "id", "array(cast(id as float), cast(id * 2 as float), cast(-id as float)) as e");
    Dataset<Row> gathered = NpuGather.allGatherOnNpu(df);
    for (int run = 0; run < 2; run++) {
      List<String> partitions =
          NpuGather.gatheredBatches(gathered)
              .mapPartitionsWithIndex(
                  (partition, batches) -> {
                    int source = 0;
                    long rows = 0;
                    List<String> wrong = new ArrayList<>();
                    while (batches.hasNext()) {
                      ColumnarBatch b = batches.next();
                      int n = b.numRows();
                      long[] ids = b.column(1).getLongs(0, n);
                      float[] e = b.column(2).getChild(0).getFloats(0, 3 * n);
                      for (int i = 0; i < n; i++) {
                        long id = source * 1000L + i;
                        if (b.column(0).getInt(i) != source
                            || ids[i] != id
                            || e[3 * i] != id
                            || e[3 * i + 1] != 2 * id
                            || e[3 * i + 2] != -id
                            || b.column(2).getArray(i).numElements() != 3) {
                          wrong.add("source " + source + " row " + i);
                        }
                      }
                      if (!(b.column(1) instanceof io.npugather.spark.arrow.ArrowBackedColumn)) {
                        wrong.add("column 1 is a " + b.column(1).getClass().getName());
                      }
                      rows += n;
                      source++;
                    }
                    return List.of(partition + ": " + source + " x " + rows + " " + wrong)
                        .iterator();
                  },
                  false)
              .collect();
      assertEquals(
          List.of("0: 4 x 4000 []", "1: 4 x 4000 []", "2: 4 x 4000 []", "3: 4 x 4000 []"),
          partitions);
    }
    IllegalArgumentException notAGather =
        assertThrows(
            IllegalArgumentException.class,
            () -> NpuGather.gatheredBatches(gathered.filter("id > 3")));
    assertTrue(notAGather.getMessage().contains("allGatherOnNpu itself"), notAGather.getMessage());
  }

  /**
   * The executor's off-heap memory while later tasks read a gather of its 4 ranks, from the
   * allocators: the gathered table once (each rank's partition, nothing received), not once per
   * rank as when each rank gathers a copy of its own.
   */
  @Test
  void theRanksOfOneExecutorHoldTheGatheredTableOnce() {
    Dataset<Row> df =
        spark.range(0, 400_000, 1, 4).selectExpr("id", "cast(id as double) as d", "id * 3 as x");
    Dataset<Row> gathered = NpuGather.allGatherOnNpu(df);
    long onePerExecutor = offHeapWhileReading(gathered, true);
    GatherMetrics m = GatherMetrics.of(gathered);
    long table = m.inputBytes(); // the blocks' bytes; the partitions' vectors hold some spare room
    long partitions = m.ownPartitionBytes();
    assertEquals(0, m.bytesReceived(), m.toString());
    assertTrue(
        onePerExecutor >= table && onePerExecutor <= partitions + partitions / 10,
        "one per executor: " + onePerExecutor + " bytes for a table of " + table + "; " + m);
    long onePerRank = offHeapWhileReading(NpuGather.allGatherOnNpu(df), false);
    assertTrue(
        onePerRank >= 4 * table - table / 10,
        "one per rank: " + onePerRank + " bytes for a table of " + table);
  }

  /** The most Arrow memory of {@link GatherMemory} any reader of {@code gathered} saw. */
  private static long offHeapWhileReading(Dataset<Row> gathered, boolean onePerExecutor) {
    spark.conf().set("spark.npugather.output.onePerExecutor", Boolean.toString(onePerExecutor));
    try {
      return ReaderMemory.byProcess(gathered).values().stream()
          .mapToLong(Long::longValue)
          .max()
          .orElseThrow();
    } finally {
      spark.conf().unset("spark.npugather.output.onePerExecutor");
    }
  }

  @Test
  void moreRanksThanTaskSlotsFailAtOnceWithAClearMessage() {
    Dataset<Row> df = spark.range(0, 100, 1, 6).toDF();
    long start = System.nanoTime();
    Exception e = assertThrows(Exception.class, () -> NpuGather.allGatherOnNpu(df).count());
    assertTrue(
        Causes.messages(e).contains("6") && Causes.messages(e).contains("4"), Causes.messages(e));
    assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(30), "not at once");
  }

  @Test
  void optionsMapAndRankSizeRepartition() {
    Dataset<Row> df = spark.range(0, 1000, 1, 1).toDF();
    Map<String, String> options = new HashMap<>();
    options.put(AllGatherOptions.RANK_SIZE, "3");
    options.put(AllGatherOptions.SOURCE_RANK_COLUMN, "src");
    options.put(AllGatherOptions.HOST_TRANSPORT, "tcp");
    Dataset<Row> out = NpuGather.allGatherOnNpu(df, options);
    assertEquals("src", out.schema().fields()[0].name());
    List<List<Row>> partitions = out.javaRDD().glom().collect();
    assertEquals(3, partitions.size());
    for (List<Row> partition : partitions) {
      assertEquals(1000, partition.size());
      assertEquals(partitions.get(0), partition);
    }
  }

  @Test
  void sourceRankColumnCollidingWithAnInputColumnIsRejected() {
    Dataset<Row> df = spark.range(0, 10, 1, 2).toDF("source_rank");
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> NpuGather.allGatherOnNpu(df));
    assertTrue(e.getMessage().contains("source_rank"), e.getMessage());
  }

  @Test
  void injectedRankFailureFailsFastByDefault() {
    // The gather is the job's result stage here, which Spark does not retry.
    Dataset<Row> df = spark.range(0, 1000, 1, 2).toDF();
    long start = System.nanoTime();
    AllGatherOptions options = AllGatherOptions.defaults().withInjectFailure("1");
    SparkException e =
        assertThrows(
            SparkException.class, () -> NpuGather.allGatherOnNpu(df, options).collectAsList());
    // The injected failure itself, not its peer's report of it.
    assertTrue(Causes.messages(e).contains("rank 1/2 (stage "), Causes.messages(e));
    assertTrue(Causes.messages(e).contains("failure injected"), Causes.messages(e));
    assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(60), "did not fail fast");
  }

  @Test
  void retryableModeSurvivesAnInjectedRankFailureWithCorrectOutput() {
    Dataset<Row> df = spark.range(0, 5000, 1, 2).selectExpr("id", "id * 2 as twice");
    AllGatherOptions options =
        AllGatherOptions.defaults().withRetryable(true).withInjectFailure("1:0");
    RankMajor.assertOnEveryPartition(df, NpuGather.allGatherOnNpu(df, options));
  }

  @Test
  void cancellingTheJobEndsABlockedGatherWithinSeconds() throws Exception {
    // Rank 1 sleeps before converting; rank 0 waits in the rendezvous until the job is cancelled.
    Dataset<Row> df =
        spark
            .range(0, 100, 1, 2)
            .toDF()
            .where(
                org.apache
                    .spark
                    .sql
                    .functions
                    .udf(
                        (Long id) -> {
                          if (org.apache.spark.TaskContext.getPartitionId() == 1) {
                            Thread.sleep(120_000);
                          }
                          return true;
                        },
                        DataTypes.BooleanType)
                    .apply(org.apache.spark.sql.functions.col("id")));
    spark.sparkContext().setJobGroup("cancel-me", "cancel test", true);
    CompletableFuture<Long> job =
        CompletableFuture.supplyAsync(
            () -> {
              spark.sparkContext().setJobGroup("cancel-me", "cancel test", true);
              return NpuGather.allGatherOnNpu(df).count();
            });
    Thread.sleep(3000);
    long start = System.nanoTime();
    spark.sparkContext().cancelJobGroup("cancel-me");
    Exception e = assertThrows(Exception.class, () -> job.get(60, TimeUnit.SECONDS));
    assertTrue(Causes.messages(e).toLowerCase().contains("cancel"), Causes.messages(e));
    assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(20), "cancel took too long");
    spark.sparkContext().clearJobGroup();
  }

  private static Object maybe(Random random, Object value) {
    return random.nextInt(5) == 0 ? null : value;
  }

  @SafeVarargs
  private static <T> scala.collection.immutable.Seq<T> scalaSeq(T... values) {
    return CollectionConverters.asScala(Arrays.asList(values)).toSeq();
  }

  private static <K, V> scala.collection.Map<K, V> scalaMap(Map<K, V> map) {
    return CollectionConverters.asScala(map);
  }
}
