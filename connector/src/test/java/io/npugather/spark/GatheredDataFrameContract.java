package io.npugather.spark;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.lit;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.spark.output.GatheredOutputs;
import io.npugather.spark.testing.Causes;
import io.npugather.spark.testing.GatherLeaks;
import io.npugather.spark.testing.JobCounter;
import io.npugather.spark.testing.LocalSpark;
import io.npugather.spark.testing.RankMajor;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.storage.StorageLevel;
import org.apache.spark.util.LongAccumulator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The result of {@code allGatherOnNpu} is a DataFrame like any other: every action and
 * transformation a user types works on it, any number of times, with the same rows. Run on a local
 * master by each subclass. Each test checks the answer against the rows the input's partitions hold
 * (rank-major, after the source rank), not only that nothing threw.
 */
abstract class GatheredDataFrameContract {
  private static final JobCounter JOBS = new JobCounter();
  private static SparkSession spark;

  @TempDir Path tmp;

  /** Starts the class's session on {@code master}, unless it runs. */
  /** The session of a subclass, on {@code cores} cores: it registers it as its extension. */
  static LocalSpark localSpark(int cores) {
    return LocalSpark.cores(cores)
        .shufflePartitions(3)
        .utc()
        .onStart(
            s -> {
              spark = s;
              s.sparkContext().addSparkListener(JOBS);
            });
  }

  @BeforeEach
  void adaptiveExecutionAsSparkShips() {
    spark.conf().set("spark.sql.adaptive.enabled", "true");
  }

  @AfterEach
  void everyOutputReleasedAndNoArrowByteLeft() {
    GatherLeaks.awaitArrowReleased();
  }

  /** 1000 ids in 2 partitions with a string beside them. */
  private static Dataset<Row> input() {
    return spark.range(0, 1000, 1, 2).selectExpr("id", "concat('v', id) AS name");
  }

  /** {@code copies} times {@code rows}, one after another. */
  private static List<Row> repeated(List<Row> rows, int copies) {
    List<Row> all = new ArrayList<>();
    for (int i = 0; i < copies; i++) {
      all.addAll(rows);
    }
    return all;
  }

  private static List<Row> sortedById(List<Row> rows) {
    List<Row> sorted = new ArrayList<>(rows);
    sorted.sort(
        Comparator.<Row>comparingLong(r -> r.getLong(1)).thenComparingInt(r -> r.getInt(0)));
    return sorted;
  }

  @Test
  void showTakeHeadFirstLimitTailAndIsEmptyAnswerFromTheGatheredRows() {
    List<Row> all = RankMajor.rows(input());
    Dataset<Row> g = NpuGather.allGatherOnNpu(input());
    g.show(); // must not throw
    String shown = ((org.apache.spark.sql.classic.Dataset<Row>) g).showString(3, 20, false);
    assertTrue(
        shown.contains("|          0|  0|  v0|") && shown.contains("|          0|  2|  v2|"),
        shown);
    assertEquals(all.subList(0, 3), List.of((Row[]) g.take(3)));
    assertEquals(all.get(0), g.head());
    assertEquals(all.get(0), g.first());
    assertEquals(all.subList(0, 5), g.limit(5).collectAsList());
    assertEquals(all.subList(all.size() - 3, all.size()), List.of((Row[]) g.tail(3)));
    assertFalse(g.isEmpty());
    assertEquals(2L * all.size(), g.count());
    assertEquals(repeated(all, 2), g.collectAsList());
    List<Row> iterated = new ArrayList<>();
    g.toLocalIterator().forEachRemaining(iterated::add);
    assertEquals(repeated(all, 2), iterated);
    LongAccumulator rowsSeen = spark.sparkContext().longAccumulator("rows seen");
    g.foreachPartition((Iterator<Row> it) -> it.forEachRemaining(r -> rowsSeen.add(1)));
    assertEquals(2L * all.size(), rowsSeen.value());
  }

  @Test
  void sqlOverATempViewWithLimitOrderByAndSubqueries() {
    Dataset<Row> g = NpuGather.allGatherOnNpu(input());
    g.createOrReplaceTempView("gathered");
    List<Row> all = RankMajor.rows(input());
    assertEquals(all.subList(0, 4), spark.sql("SELECT * FROM gathered LIMIT 4").collectAsList());
    assertEquals(
        List.of(RowFactory.create(999L), RowFactory.create(999L), RowFactory.create(998L)),
        spark.sql("SELECT id FROM gathered ORDER BY id DESC LIMIT 3").collectAsList());
    assertEquals(
        1000L,
        spark
            .sql(
                "SELECT count(*) FROM gathered WHERE id IN "
                    + "(SELECT id FROM gathered WHERE source_rank = 1)")
            .first()
            .getLong(0));
    assertEquals(
        2000L,
        spark
            .sql(
                "SELECT count(*) FROM gathered g WHERE EXISTS "
                    + "(SELECT 1 FROM gathered h WHERE h.id = g.id AND h.source_rank = g.source_rank)")
            .first()
            .getLong(0));
  }

  @Test
  void aSecondActionAReusedRddAndTwoConcurrentActionsGiveTheSameRows() throws Exception {
    List<Row> expected = repeated(RankMajor.rows(input()), 2);
    Dataset<Row> g = NpuGather.allGatherOnNpu(input());
    assertEquals(expected, g.collectAsList());
    // Released when its job ended (spark.npugather.output.releaseDelay 0): gathered again.
    assertEquals(expected, g.collectAsList());
    JavaRDD<Row> rdd = g.javaRDD();
    assertEquals(expected.size(), rdd.count());
    assertEquals(expected, rdd.collect());
    assertEquals(expected.size(), rdd.count());
    CompletableFuture<List<Row>> first = CompletableFuture.supplyAsync(g::collectAsList);
    CompletableFuture<List<Row>> second = CompletableFuture.supplyAsync(g::collectAsList);
    assertEquals(expected, first.get(120, TimeUnit.SECONDS));
    assertEquals(expected, second.get(120, TimeUnit.SECONDS));
  }

  @Test
  void aKeptOutputServesTheNextActionsWithoutGatheringAgain() throws Exception {
    spark.conf().set(GatheredOutputs.RELEASE_DELAY, "3s");
    try {
      List<Row> expected = repeated(RankMajor.rows(input()), 2);
      Dataset<Row> g = NpuGather.allGatherOnNpu(input());
      assertEquals(expected, g.collectAsList());
      GatherMetrics metrics = GatherMetrics.of(g);
      long gatheredOnce = metrics.rowsGathered();
      assertEquals(expected, g.collectAsList());
      assertEquals(gatheredOnce, metrics.rowsGathered(), "the later actions read the same gather");
      // javaRDD() plans the gather anew: a run of its own, which the gather's figures count too.
      assertEquals(expected, g.javaRDD().collect());
      assertEquals(2 * gatheredOnce, metrics.rowsGathered(), "another plan of the gather");
      GatherLeaks.awaitArrowReleased(); // after the delay
      assertEquals(expected, g.collectAsList());
      assertTrue(metrics.rowsGathered() > 2 * gatheredOnce, "gathered again after the release");
    } finally {
      spark.conf().unset(GatheredOutputs.RELEASE_DELAY);
    }
  }

  @Test
  void globalSortCoalesceRepartitionUnionsAndJoinsOnBothSides() {
    List<Row> all = RankMajor.rows(input());
    Dataset<Row> g = NpuGather.allGatherOnNpu(input());
    assertEquals(
        sortedById(repeated(all, 2)), g.orderBy(col("id"), col("source_rank")).collectAsList());
    assertEquals(sortedById(repeated(all, 2)), g.sort("id", "source_rank").collectAsList());
    assertEquals(2L * all.size(), g.coalesce(1).count());
    assertEquals(repeated(all, 2), g.coalesce(1).collectAsList());
    assertEquals(2L * all.size(), g.repartition(3).count());
    assertEquals(4L * all.size(), g.union(g).count());
    assertEquals(sortedById(repeated(all, 4)), sortedById(g.unionByName(g).collectAsList()));
    Dataset<Row> plain =
        input().withColumn("source_rank", lit(-1)).select("source_rank", "id", "name");
    assertEquals(3L * all.size(), g.union(plain).count());
    Dataset<Row> some = spark.range(0, 1000, 100).toDF("id");
    assertEquals(20L, g.join(some, "id").count());
    assertEquals(20L, some.join(g, "id").count());
    // Every (id, source_rank) stands twice on each side (once per output partition).
    assertEquals(
        4L * all.size(),
        g.join(
                g.select("id", "source_rank"),
                CollectionConverters.asScala(List.of("id", "source_rank")).toSeq())
            .count());
  }

  /**
   * Adaptive execution re-plans a query each time one of its stages finishes; over a gathered
   * result that re-planning must converge, whatever the input under the gather. Each query is
   * bounded, so a plan that never finishes fails its test instead of hanging the build.
   */
  @TestFactory
  Stream<DynamicTest> queriesThatAdaptiveExecutionReplansFinishWithTheRightAnswer() {
    return GatheredQueryFamily.inputs().stream()
        .flatMap(
            input ->
                Stream.of(true, false)
                    .flatMap(
                        adaptive ->
                            GatheredQueryFamily.queries().stream()
                                .map(
                                    query ->
                                        DynamicTest.dynamicTest(
                                            query.name()
                                                + " over a "
                                                + input.name()
                                                + " input, adaptive execution "
                                                + (adaptive ? "on" : "off"),
                                            () -> assertQueryAnswers(input, query, adaptive)))));
  }

  private static void assertQueryAnswers(
      GatheredQueryFamily.Input input, GatheredQueryFamily.Query query, boolean adaptive) {
    spark.conf().set("spark.sql.adaptive.enabled", Boolean.toString(adaptive));
    Dataset<Row> in = input.in(spark);
    try {
      List<Row> all = RankMajor.rows(in);
      int ranks = in.javaRDD().getNumPartitions();
      List<List<Object>> expected = GatheredQueryFamily.sorted(query.expected().apply(all, ranks));
      List<List<Object>> actual =
          assertTimeoutPreemptively(
              Duration.ofSeconds(90),
              () -> GatheredQueryFamily.answer(query.over().apply(NpuGather.allGatherOnNpu(in))),
              () ->
                  "the query did not finish: "
                      + query.name()
                      + " over a "
                      + input.name()
                      + " input");
      assertEquals(expected, actual);
    } finally {
      in.unpersist(true);
    }
  }

  @Test
  void adaptiveExecutionOffGivesTheSameAnswers() {
    spark.conf().set("spark.sql.adaptive.enabled", "false");
    List<Row> all = RankMajor.rows(input());
    Dataset<Row> g = NpuGather.allGatherOnNpu(input());
    assertEquals(all.subList(0, 3), List.of((Row[]) g.take(3)));
    assertEquals(
        sortedById(repeated(all, 2)), g.orderBy(col("id"), col("source_rank")).collectAsList());
    assertEquals(20L, g.join(spark.range(0, 1000, 100).toDF("id"), "id").count());
    assertEquals(repeated(all, 2), g.coalesce(1).collectAsList());
  }

  @Test
  void cachePersistCheckpointsAndParquetWritesKeepTheRows() {
    List<Row> expected = repeated(RankMajor.rows(input()), 2);
    Dataset<Row> cached = NpuGather.allGatherOnNpu(input()).cache();
    assertEquals(expected.size(), cached.count());
    assertEquals(expected, cached.collectAsList());
    cached.unpersist(true);
    Dataset<Row> persisted = NpuGather.allGatherOnNpu(input()).persist(StorageLevel.DISK_ONLY());
    assertEquals(expected, persisted.collectAsList());
    assertEquals(expected, persisted.collectAsList());
    persisted.unpersist(true);
    assertEquals(expected, NpuGather.allGatherOnNpu(input()).localCheckpoint().collectAsList());
    spark.sparkContext().setCheckpointDir(tmp.resolve("checkpoints").toString());
    assertEquals(expected, NpuGather.allGatherOnNpu(input()).checkpoint().collectAsList());
    String parquet = tmp.resolve("gathered.parquet").toString();
    NpuGather.allGatherOnNpu(input()).coalesce(1).write().parquet(parquet);
    Dataset<Row> back = spark.read().parquet(parquet);
    assertEquals(1, back.javaRDD().getNumPartitions());
    assertEquals(
        sortedById(expected), sortedById(back.select("source_rank", "id", "name").collectAsList()));
    String partitioned = tmp.resolve("gathered-by-rank.parquet").toString();
    NpuGather.allGatherOnNpu(input()).write().partitionBy("source_rank").parquet(partitioned);
    assertEquals(
        sortedById(expected),
        sortedById(
            spark.read().parquet(partitioned).select("source_rank", "id", "name").collectAsList()));
  }

  @Test
  void explainRunsNoJobAndShowsTheGather() {
    Dataset<Row> g = NpuGather.allGatherOnNpu(input()).filter("id > 10");
    int jobs = JOBS.get();
    String plan =
        g.queryExecution()
            .explainString(org.apache.spark.sql.execution.ExplainMode.fromString("formatted"));
    g.explain();
    assertTrue(plan.contains("NpuAllGather"), plan);
    assertEquals(jobs, JOBS.get(), "explain ran a job");
  }

  @Test
  void emptyAndDegenerateInputs() {
    Dataset<Row> noPartitions = NpuGather.allGatherOnNpu(spark.range(0, 0, 1, 2).toDF());
    assertEquals(0L, noPartitions.count());
    assertTrue(noPartitions.isEmpty());
    assertEquals(List.of(), noPartitions.collectAsList());
    noPartitions.show();
    Dataset<Row> nothing = NpuGather.allGatherOnNpu(spark.emptyDataFrame());
    assertEquals(List.of("source_rank"), List.of(nothing.columns()));
    assertEquals(0L, nothing.count());
    Dataset<Row> allEmpty =
        NpuGather.allGatherOnNpu(spark.range(0, 10, 1, 2).toDF().filter("id < 0"));
    assertEquals(2, allEmpty.javaRDD().getNumPartitions());
    assertEquals(0L, allEmpty.count());
    assertTrue(allEmpty.isEmpty());
    assertEquals(List.of(), List.of((Row[]) allEmpty.take(1)));
    Dataset<Row> one = spark.range(0, 10, 1, 1).toDF();
    assertEquals(RankMajor.rows(one), NpuGather.allGatherOnNpu(one).collectAsList());
    Dataset<Row> many = spark.range(0, 100, 1, 8).toDF();
    Dataset<Row> two = NpuGather.allGatherOnNpu(many, Map.of("npugather.rankSize", "2"));
    assertEquals(2, two.javaRDD().getNumPartitions());
    assertEquals(200L, two.count());
    List<Long> ids = new ArrayList<>();
    for (Row row : two.collectAsList()) {
      ids.add(row.getLong(1));
    }
    ids.sort(null);
    List<Long> twice = new ArrayList<>();
    for (long id = 0; id < 100; id++) {
      twice.add(id);
      twice.add(id);
    }
    assertEquals(twice, ids);
    IllegalStateException tooMany =
        assertThrows(IllegalStateException.class, () -> NpuGather.allGatherOnNpu(many).count());
    assertTrue(tooMany.getMessage().contains("npugather.rankSize"), tooMany.getMessage());
  }

  @Test
  void twoGathersThatTogetherNeedMoreSlotsThanTheClusterHasRunOneAfterAnother() {
    int slots = spark.sparkContext().defaultParallelism();
    Dataset<Row> a = spark.range(0, 100, 1, slots).toDF();
    Dataset<Row> b = spark.range(100, 300, 1, slots).toDF();
    Dataset<Row> ga = NpuGather.allGatherOnNpu(a);
    Dataset<Row> gb = NpuGather.allGatherOnNpu(b);
    assertEquals(slots * 300L, ga.union(gb).count());
    assertEquals(
        slots * 100L * slots,
        ga.join(ga.select(col("id").as("other")), col("id").equalTo(col("other"))).count());
    assertEquals(0L, ga.join(gb, "id").count());
  }

  @Test
  void aGatherThatFailsIsNotRunAgainUnlessRetryable() {
    Dataset<Row> df = spark.range(0, 100, 1, 2).toDF();
    AllGatherOptions failing = AllGatherOptions.defaults().withInjectFailure("1");
    Exception e =
        assertThrows(Exception.class, () -> NpuGather.allGatherOnNpu(df, failing).collectAsList());
    String messages = Causes.messages(e);
    assertTrue(
        messages.contains("npugather.retryable is false")
            && messages.contains("failure injected")
            && !messages.contains("REMOTE_ERROR"),
        messages);
    AllGatherOptions onceFailing =
        AllGatherOptions.defaults().withRetryable(true).withInjectFailure("1:0");
    assertEquals(
        repeated(RankMajor.rows(df), 2), NpuGather.allGatherOnNpu(df, onceFailing).collectAsList());
  }
}
