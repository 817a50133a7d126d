package io.npugather.spark.join;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.pmod;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.spark.GatherMetrics;
import io.npugather.spark.NpuGather;
import io.npugather.spark.testing.LocalSpark;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiFunction;
import java.util.function.Function;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.ExplainMode;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec;
import org.apache.spark.sql.execution.adaptive.QueryStageExec;
import org.apache.spark.sql.execution.joins.npugather.ExecutorBuildExec;
import org.apache.spark.sql.execution.metric.SQLMetric;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.function.ThrowingSupplier;
import scala.collection.immutable.Map;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Joins whose build side is all-gathered onto the executors ({@link
 * NpuGather#broadcastOnExecutors}, the {@code ALLGATHER} hint) answer exactly what Spark answers
 * for the same join without it, row for row as multisets: every join type the build side allows,
 * one and two keys, null-safe keys, non-equi conditions, duplicate and null keys, empty sides, a
 * build side that is aggregated or itself gathered, adaptive execution on and off. Each query is
 * bounded by a timeout.
 */
abstract class ExecutorBroadcastJoinContract {
  private static SparkSession spark;

  /** The session of a subclass, on {@code cores} cores: it registers it as its extension. */
  static LocalSpark localSpark(int cores) {
    return LocalSpark.cores(cores).shufflePartitions(3).withExtensions().onStart(s -> spark = s);
  }

  /**
   * 3000 stream rows: keys 0..199 with duplicates and nulls, a string key, a value, and a long key
   * far apart over the whole range of longs, its ends included.
   */
  private static Dataset<Row> stream() {
    return spark
        .range(0, 3000, 1, 3)
        .selectExpr(
            "IF(id % 17 = 0, NULL, CAST((id * 7) % 200 AS INT)) AS k",
            "CONCAT('s', CAST(id % 7 AS STRING)) AS k2",
            "CAST(id AS DOUBLE) / 3 AS v",
            wideKey("id * 7", 200, 23, 101, 83) + " AS lk");
  }

  /** 400 build rows: keys as the stream side's, 0..249, the same string key, a value. */
  private static Dataset<Row> build() {
    return spark
        .range(0, 400, 1, 2)
        .selectExpr(
            "IF(id % 13 = 0, NULL, CAST((id * 11) % 250 AS INT)) AS rk",
            "CONCAT('s', CAST(id % 5 AS STRING)) AS rk2",
            "id * 3 AS w",
            wideKey("id * 11", 250, 13, 97, 89) + " AS rlk");
  }

  /**
   * {@code build} with a column of every kind beside its own, nulls in each: fixed-width, decimal
   * beyond a long, string, binary, array, struct and map, so that its rows carry variable-length
   * parts, nested rows and null bits.
   */
  private static Dataset<Row> withEveryKindOfColumn(Dataset<Row> build) {
    return build.selectExpr(
        "*",
        "IF(w % 7 = 0, NULL, CAST(w AS DOUBLE) / 3) AS d",
        "IF(w % 5 = 0, NULL, CAST(w AS DECIMAL(38, 6)) * 1000000000000) AS dec",
        "IF(w % 4 = 0, NULL, REPEAT(rk2, CAST(w % 9 AS INT))) AS s",
        "IF(w % 6 = 0, NULL, CAST(REPEAT('b', CAST(w % 11 AS INT)) AS BINARY)) AS bin",
        "IF(w % 8 = 0, NULL, ARRAY(CAST(w AS FLOAT), NULL, 1.5F)) AS arr",
        "NAMED_STRUCT('x', w, 'y', IF(w % 3 = 0, NULL, rk2)) AS st",
        "IF(w % 9 = 0, NULL, MAP(rk2, w)) AS m",
        "IF(w % 10 = 0, NULL, TIMESTAMP_SECONDS(w)) AS ts");
  }

  /**
   * A long key spread over the whole range of longs: {@code (step % values - values / 2)} times a
   * large odd number, null every {@code nullEvery}-th row, the least and the greatest long every
   * {@code minEvery}-th and {@code maxEvery}-th.
   */
  private static String wideKey(
      String step, int values, int nullEvery, int minEvery, int maxEvery) {
    return String.format(
        "CASE WHEN id %% %d = 0 THEN NULL WHEN id %% %d = 0 THEN -9223372036854775808L"
            + " WHEN id %% %d = 0 THEN 9223372036854775807L"
            + " ELSE ((%s) %% %d - %d) * 36028797018963913L END",
        nullEvery, minEvery, maxEvery, step, values, values / 2);
  }

  /**
   * A join of a stream side and a build side ({@code buildOf} the build table), the build side
   * marked or not.
   */
  private record Query(
      String name,
      boolean buildsLeft,
      Function<Dataset<Row>, Dataset<Row>> buildOf,
      BiFunction<Dataset<Row>, Dataset<Row>, Dataset<Row>> join) {
    Query(
        String name,
        boolean buildsLeft,
        BiFunction<Dataset<Row>, Dataset<Row>, Dataset<Row>> join) {
      this(name, buildsLeft, Function.identity(), join);
    }
  }

  private static List<Query> queries() {
    return List.of(
        new Query("inner", false, (l, r) -> l.join(r, col("k").equalTo(col("rk")))),
        new Query(
            "left outer", false, (l, r) -> l.join(r, col("k").equalTo(col("rk")), "left_outer")),
        new Query(
            "right outer, build left",
            true,
            (b, s) -> b.join(s, col("rk").equalTo(col("k")), "right_outer")),
        new Query(
            "left semi", false, (l, r) -> l.join(r, col("k").equalTo(col("rk")), "left_semi")),
        new Query(
            "left anti", false, (l, r) -> l.join(r, col("k").equalTo(col("rk")), "left_anti")),
        new Query(
            "two keys",
            false,
            (l, r) -> l.join(r, col("k").equalTo(col("rk")).and(col("k2").equalTo(col("rk2"))))),
        new Query("null-safe key", false, (l, r) -> l.join(r, col("k").eqNullSafe(col("rk")))),
        new Query(
            "two int keys, one long to Spark",
            false,
            (l, r) ->
                l.join(
                    r,
                    col("k")
                        .equalTo(col("rk"))
                        .and(pmod(col("k"), lit(7)).equalTo(col("w").mod(7).cast("int"))))),
        new Query("long key far apart", false, (l, r) -> l.join(r, col("lk").equalTo(col("rlk")))),
        new Query(
            "long key far apart, left outer",
            false,
            (l, r) -> l.join(r, col("lk").equalTo(col("rlk")), "left_outer")),
        new Query(
            "long key far apart, right outer, build left",
            true,
            (b, s) -> b.join(s, col("rlk").equalTo(col("lk")), "right_outer")),
        new Query(
            "long key far apart, left semi",
            false,
            (l, r) -> l.join(r, col("lk").equalTo(col("rlk")), "left_semi")),
        new Query(
            "long key far apart, left anti",
            false,
            (l, r) -> l.join(r, col("lk").equalTo(col("rlk")), "left_anti")),
        new Query(
            "long key far apart, null-safe",
            false,
            (l, r) -> l.join(r, col("lk").eqNullSafe(col("rlk")))),
        new Query(
            "equi-join with another condition",
            false,
            (l, r) ->
                l.join(
                    r,
                    col("k").equalTo(col("rk")).and(col("v").gt(col("w").divide(4))),
                    "left_outer")),
        new Query(
            "non-equi inner",
            false,
            (l, r) -> l.join(r, col("k").lt(col("rk")).and(col("rk").lt(col("k").plus(3))))),
        new Query(
            "non-equi left outer",
            false,
            (l, r) ->
                l.join(
                    r, col("k").lt(col("rk")).and(col("rk").lt(col("k").plus(2))), "left_outer")),
        new Query(
            "non-equi left anti",
            false,
            (l, r) -> l.join(r, col("k").gt(col("rk").plus(240)), "left_anti")),
        new Query(
            "aggregated build side",
            false,
            (Dataset<Row> r) -> r.groupBy("rk").count(),
            (l, r) -> l.join(r, col("k").equalTo(col("rk")))),
        new Query(
            "build rows of every kind of column",
            false,
            ExecutorBroadcastJoinContract::withEveryKindOfColumn,
            (l, r) -> l.join(r, col("k").equalTo(col("rk")), "left_outer")),
        new Query(
            "build rows of every kind of column, non-equi",
            false,
            ExecutorBroadcastJoinContract::withEveryKindOfColumn,
            (l, r) -> l.join(r, col("k").lt(col("rk")).and(col("rk").lt(col("k").plus(2))))),
        new Query(
            "empty build side",
            false,
            (Dataset<Row> r) -> r.filter("w < 0"),
            (l, r) -> l.join(r, col("k").equalTo(col("rk")), "left_outer")),
        new Query(
            "filtered build side",
            false,
            (l, r) -> l.join(r.filter("w % 2 = 0"), col("k").equalTo(col("rk")))),
        new Query(
            "empty stream side",
            false,
            (l, r) -> l.filter("v < 0").join(r, col("k").equalTo(col("rk")))));
  }

  /** The settings each query runs under: adaptive execution on and off, generated code or not. */
  private record Setting(boolean adaptive, boolean generatedCode) {
    @Override
    public String toString() {
      return "adaptive execution "
          + (adaptive ? "on" : "off")
          + (generatedCode ? "" : ", without generated code");
    }
  }

  @TestFactory
  Stream<DynamicTest> everyJoinAnswersAsSparkDoesWithAndWithoutAdaptiveExecution() {
    List<DynamicTest> tests = new ArrayList<>();
    for (Setting setting :
        List.of(new Setting(true, true), new Setting(false, true), new Setting(true, false))) {
      for (Query q : queries()) {
        tests.add(
            DynamicTest.dynamicTest(
                q.name() + ", " + setting, () -> assertSameAsSpark(q, setting)));
      }
    }
    return tests.stream();
  }

  private static final Pattern GENERATED_HASH_JOIN =
      Pattern.compile("\\*\\(\\d+\\) ExecutorBroadcastHashJoin");

  private static void assertSameAsSpark(Query q, Setting setting) {
    spark.conf().set("spark.sql.adaptive.enabled", Boolean.toString(setting.adaptive()));
    spark.conf().set("spark.sql.codegen.wholeStage", Boolean.toString(setting.generatedCode()));
    try {
      Dataset<Row> buildSide = q.buildOf().apply(build());
      Dataset<Row> expected =
          q.buildsLeft()
              ? q.join().apply(buildSide, stream())
              : q.join().apply(stream(), buildSide);
      Dataset<Row> mark = NpuGather.broadcastOnExecutors(buildSide);
      Dataset<Row> marked =
          q.buildsLeft() ? q.join().apply(mark, stream()) : q.join().apply(stream(), mark);
      String plan = explained(marked);
      assertTrue(plan.contains("ExecutorBuild"), plan);
      List<String> want = sorted(expected);
      for (int run = 0; run < 2; run++) { // the same query twice
        List<String> got =
            assertTimeoutPreemptively(Duration.ofSeconds(120), () -> sorted(marked), q::name);
        assertEquals(want, got, q.name());
      }
      String executed = explained(marked); // the final plan, after the runs
      if (executed.contains("ExecutorBroadcastHashJoin")) {
        assertEquals(
            setting.generatedCode(), GENERATED_HASH_JOIN.matcher(executed).find(), executed);
      }
    } finally {
      spark.conf().unset("spark.sql.codegen.wholeStage");
    }
  }

  @Test
  void theSqlHintAndDataFrameHintPlanTheSameJoin() {
    stream().createOrReplaceTempView("l");
    build().createOrReplaceTempView("r");
    String sql = "SELECT %s l.k, l.v, r.w FROM l JOIN r ON l.k = r.rk";
    List<String> want = sorted(spark.sql(String.format(sql, "")));
    for (String hint : List.of("/*+ ALLGATHER(r) */", "/*+ allgather(r) */")) {
      Dataset<Row> hinted = spark.sql(String.format(sql, hint));
      String plan = hinted.queryExecution().explainString(ExplainMode.fromString("simple"));
      assertTrue(plan.contains("ExecutorBroadcastHashJoin") && plan.contains("NpuAllGather"), plan);
      assertEquals(want, sorted(hinted));
    }
    Dataset<Row> byHint = stream().join(build().hint("allgather"), col("k").equalTo(col("rk")));
    String plan = byHint.queryExecution().explainString(ExplainMode.fromString("simple"));
    assertTrue(plan.contains("ExecutorBroadcastHashJoin"), plan);
    assertEquals(sorted(stream().join(build(), col("k").equalTo(col("rk")))), sorted(byHint));
  }

  @Test
  void aHintTheJoinCannotHonourLeavesSparksJoinAndTheExplainSaysWhyOnce() {
    for (boolean adaptive : List.of(true, false)) {
      spark.conf().set("spark.sql.adaptive.enabled", Boolean.toString(adaptive));
      Dataset<Row> full =
          stream()
              .join(
                  NpuGather.broadcastOnExecutors(build()),
                  col("k").equalTo(col("rk")),
                  "full_outer");
      String plan = explained(full);
      assertFalse(plan.contains("ExecutorBuild"), plan);
      assertEquals(
          1,
          occurrences(plan, "AllGatherNotUsed (a full outer join cannot build this side)"),
          plan);
      List<String> want = sorted(stream().join(build(), col("k").equalTo(col("rk")), "full_outer"));
      assertEquals(want, timed("full outer", () -> sorted(full)));
      assertEquals(want, timed("full outer, again", () -> sorted(full)));
    }
    spark.conf().unset("spark.sql.adaptive.enabled");
  }

  /**
   * With {@code spark.npugather.join.auto}, an equi-join whose build side is above Spark's
   * broadcast threshold and within the limit is planned as if hinted; outside that range, or with
   * the setting off, Spark plans it; the answers are Spark's either way.
   */
  @Test
  void theAutomaticModePicksJoinsByTheBuildSidesSize() {
    spark.conf().set("spark.sql.adaptive.enabled", "false");
    spark.conf().set("spark.sql.autoBroadcastJoinThreshold", "1k");
    try {
      Function<Dataset<Row>, Dataset<Row>> inner =
          r -> stream().join(r, col("k").equalTo(col("rk")));
      Function<Dataset<Row>, Dataset<Row>> leftOuter =
          r -> stream().join(r, col("k").equalTo(col("rk")), "left_outer");
      List<String> wantInner = sorted(inner.apply(build()));
      List<String> wantLeftOuter = sorted(leftOuter.apply(build()));

      spark.conf().set("spark.npugather.join.auto", "true");
      for (Function<Dataset<Row>, Dataset<Row>> query : List.of(inner, leftOuter)) {
        Dataset<Row> joined = query.apply(build());
        String plan = explained(joined);
        assertTrue(plan.contains("ExecutorBroadcastHashJoin"), plan);
        assertTrue(plan.contains("automatic"), plan);
        List<String> want = query == inner ? wantInner : wantLeftOuter;
        assertEquals(want, timed("automatic", () -> sorted(joined)));
      }
      // A build side above the limit, and one Spark broadcasts, are Spark's.
      spark.conf().set("spark.npugather.join.maxBuildBytes", "2k");
      Dataset<Row> aboveTheLimit = inner.apply(build());
      assertFalse(explained(aboveTheLimit).contains("ExecutorBuild"), explained(aboveTheLimit));
      assertEquals(wantInner, timed("above the limit", () -> sorted(aboveTheLimit)));
      spark.conf().unset("spark.npugather.join.maxBuildBytes");
      spark.conf().set("spark.sql.autoBroadcastJoinThreshold", "10m");
      Dataset<Row> broadcast = inner.apply(build());
      String plan = explained(broadcast);
      assertTrue(plan.contains("BroadcastHashJoin") && !plan.contains("ExecutorBuild"), plan);
      // Hinted joins (Spark's hints included) are left as hinted.
      spark.conf().set("spark.sql.autoBroadcastJoinThreshold", "1k");
      Dataset<Row> merge = stream().join(build().hint("merge"), col("k").equalTo(col("rk")));
      assertTrue(explained(merge).contains("SortMergeJoin"), explained(merge));

      spark.conf().set("spark.npugather.join.auto", "false");
      Dataset<Row> off = inner.apply(build());
      assertFalse(explained(off).contains("ExecutorBuild"), explained(off));
    } finally {
      spark.conf().unset("spark.npugather.join.auto");
      spark.conf().unset("spark.npugather.join.maxBuildBytes");
      spark.conf().unset("spark.sql.autoBroadcastJoinThreshold");
      spark.conf().unset("spark.sql.adaptive.enabled");
    }
  }

  /**
   * Under adaptive execution the automatic choice is checked again with the runtime size: a build
   * side estimated above Spark's broadcast threshold that turns out below it is broadcast by Spark.
   */
  @Test
  void theAutomaticModeLeavesToSparkABuildSideThatIsSmallAtRuntime() {
    spark.conf().set("spark.sql.adaptive.enabled", "true");
    spark.conf().set("spark.sql.autoBroadcastJoinThreshold", "4k");
    spark.conf().set("spark.npugather.join.auto", "true");
    try {
      // Estimated as the whole build table (about 16 KB), 10 rows at runtime.
      Dataset<Row> joined =
          stream().join(build().filter("w < 30"), col("k").equalTo(col("rk")), "left_outer");
      String before = explained(joined);
      assertTrue(before.contains("ExecutorBroadcastHashJoin"), before);
      List<String> got = timed("small at runtime", () -> sorted(joined));
      String after = explained(joined);
      assertTrue(after.contains("AllGatherNotUsed (automatic:"), after);
      assertTrue(after.contains("BroadcastHashJoin"), after);
      spark.conf().set("spark.npugather.join.auto", "false");
      assertEquals(
          sorted(
              stream().join(build().filter("w < 30"), col("k").equalTo(col("rk")), "left_outer")),
          got);
    } finally {
      spark.conf().unset("spark.npugather.join.auto");
      spark.conf().unset("spark.sql.autoBroadcastJoinThreshold");
      spark.conf().unset("spark.sql.adaptive.enabled");
    }
  }

  /**
   * A hinted build side above {@code spark.npugather.join.maxBuildBytes} fails with one line naming
   * its size, the limit and the setting, before the gather's barrier stage runs.
   */
  @Test
  void aHintedBuildSideAboveTheLimitFailsBeforeTheGatherRuns() throws Exception {
    AtomicInteger barrierStages = new AtomicInteger();
    SparkListener listener =
        new SparkListener() {
          @Override
          public void onStageSubmitted(SparkListenerStageSubmitted event) {
            if (event.stageInfo().rddInfos().exists(info -> info.isBarrier())) {
              barrierStages.incrementAndGet();
            }
          }
        };
    spark.sparkContext().addSparkListener(listener);
    spark.conf().set("spark.npugather.join.maxBuildBytes", "1k");
    try {
      for (boolean adaptive : List.of(true, false)) {
        spark.conf().set("spark.sql.adaptive.enabled", Boolean.toString(adaptive));
        Dataset<Row> joined =
            stream().join(NpuGather.broadcastOnExecutors(build()), col("k").equalTo(col("rk")));
        Exception e =
            assertThrows(Exception.class, () -> timed("above the limit", joined::collectAsList));
        Throwable cause = e;
        while (!(cause instanceof IllegalStateException) && cause.getCause() != null) {
          cause = cause.getCause();
        }
        String message = cause.getMessage();
        assertTrue(
            message.matches(
                "the ALLGATHER build side is \\d+ bytes \\(\\d+\\.\\d MiB, Spark's size of its"
                    + " rows before the gather\\), above its limit of 1024 bytes from"
                    + " spark.npugather.join.maxBuildBytes=1k; raise that setting or drop the hint"
                    + " so that Spark plans the join"),
            message);
        spark.sparkContext().listenerBus().waitUntilEmpty();
        assertEquals(0, barrierStages.get(), "barrier stages run");
      }
      IllegalArgumentException bad =
          assertThrows(
              IllegalArgumentException.class,
              () -> spark.conf().set("spark.npugather.join.maxBuildBytes", "lots"));
      assertEquals(
          "spark.npugather.join.maxBuildBytes = 'lots' is invalid; allowed: a positive size such as"
              + " 512m or 8g",
          bad.getMessage());
    } finally {
      spark.sparkContext().removeSparkListener(listener);
      spark.conf().unset("spark.npugather.join.maxBuildBytes");
      spark.conf().unset("spark.sql.adaptive.enabled");
    }
  }

  /** A marked build side's figures are its mark's, in the DataFrame API and in SQL. */
  @Test
  void theFiguresOfAMarkedBuildSideAreThoseOfItsJoins() {
    long slots = spark.sparkContext().defaultParallelism();
    long built = build().where("rk IS NOT NULL").count(); // the join's filter moves under the mark
    Dataset<Row> mark = NpuGather.broadcastOnExecutors(build());
    Dataset<Row> joined = stream().join(mark, col("k").equalTo(col("rk")));
    assertSame(GatherMetrics.of(mark), GatherMetrics.of(joined));
    timed("marked", joined::collectAsList);
    assertEquals(slots * built, GatherMetrics.of(joined).rowsGathered(), "every slot's rank");

    stream().createOrReplaceTempView("l");
    build().createOrReplaceTempView("r");
    Dataset<Row> hinted =
        spark.sql("SELECT /*+ ALLGATHER(r) */ l.k, r.w FROM l JOIN r ON l.k = r.rk");
    timed("hinted", hinted::collectAsList);
    assertEquals(slots * built, GatherMetrics.of(hinted).rowsGathered(), "every slot's rank");
  }

  /** Hash and nested-loop joins read the gathered build rows where they lie: none is copied. */
  @Test
  void everyJoinsBuildSideIsReadWhereItLies() {
    Dataset<Row> mark = NpuGather.broadcastOnExecutors(build());
    for (Column on :
        List.of(
            col("lk").equalTo(col("rlk")),
            col("k2").equalTo(col("rk2")),
            col("k").equalTo(col("rk")).and(col("k2").equalTo(col("rk2"))),
            col("k").lt(col("rk")))) {
      Dataset<Row> joined = stream().join(mark, on);
      timed(on.toString(), joined::collectAsList);
      Map<String, SQLMetric> figures = buildNode(joined).metrics();
      assertTrue(figures.apply("rowsBuilt").value() > 0, explained(joined));
      assertEquals(0, figures.apply("rowsCopied").value(), "rows copied on " + on);
    }
  }

  /** The build side's node in {@code df}'s executed plan. */
  private static ExecutorBuildExec buildNode(Dataset<Row> df) {
    Deque<SparkPlan> plans = new ArrayDeque<>(List.of(df.queryExecution().executedPlan()));
    while (!plans.isEmpty()) {
      SparkPlan plan = plans.pop();
      if (plan instanceof ExecutorBuildExec build) {
        return build;
      } else if (plan instanceof AdaptiveSparkPlanExec adaptive) {
        plans.push(adaptive.executedPlan());
      } else if (plan instanceof QueryStageExec stage) {
        plans.push(stage.plan());
      }
      plans.addAll(CollectionConverters.asJava(plan.children()));
    }
    throw new AssertionError("no ExecutorBuild in " + explained(df));
  }

  @Test
  void aGatheredBuildSideJoinsLikeAnyOther() {
    Dataset<Row> gathered = NpuGather.allGatherOnNpu(build()).drop("source_rank");
    Dataset<Row> marked =
        stream().join(NpuGather.broadcastOnExecutors(gathered), col("k").equalTo(col("rk")));
    assertEquals(sorted(stream().join(gathered, col("k").equalTo(col("rk")))), sorted(marked));
  }

  private static String explained(Dataset<Row> df) {
    return df.queryExecution().explainString(ExplainMode.fromString("simple"));
  }

  private static int occurrences(String text, String part) {
    int n = 0;
    for (int at = text.indexOf(part); at >= 0; at = text.indexOf(part, at + 1)) {
      n++;
    }
    return n;
  }

  private static <T> T timed(String what, ThrowingSupplier<T> action) {
    return assertTimeoutPreemptively(Duration.ofSeconds(120), action, what);
  }

  private static List<String> sorted(Dataset<Row> df) {
    List<String> rows = new ArrayList<>();
    for (Row r : df.collectAsList()) {
      rows.add(rendered(r));
    }
    rows.sort(null);
    return rows;
  }

  /** {@code r}'s values as text, a binary one by its bytes (not the array's identity). */
  private static String rendered(Row r) {
    StringBuilder text = new StringBuilder("[");
    for (int i = 0; i < r.length(); i++) {
      Object v = r.get(i);
      text.append(i == 0 ? "" : ",")
          .append(v instanceof byte[] bytes ? Arrays.toString(bytes) : String.valueOf(v));
    }
    return text.append(']').toString();
  }
}
