package io.npugather.spark.join;

import static org.apache.spark.sql.functions.col;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.spark.NpuGather;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BiFunction;
import java.util.function.Function;
import java.util.stream.Stream;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.ExplainMode;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

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

  static void start(String master) {
    spark =
        SparkSession.builder()
            .master(master)
            .appName("ExecutorBroadcastJoinContract " + master)
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "3")
            .config("spark.sql.extensions", "io.npugather.spark.NpuGatherExtensions")
            .getOrCreate();
  }

  @AfterAll
  static void stopSpark() {
    spark.stop();
  }

  /** 3000 stream rows: keys 0..199 with duplicates and nulls, a string key, a value. */
  private static Dataset<Row> stream() {
    return spark
        .range(0, 3000, 1, 3)
        .selectExpr(
            "IF(id % 17 = 0, NULL, CAST((id * 7) % 200 AS INT)) AS k",
            "CONCAT('s', CAST(id % 7 AS STRING)) AS k2", "CAST(id AS DOUBLE) / 3 AS v");
  }

  /** 400 build rows: keys 0..249 with duplicates and nulls, the same string key, a value. */
  private static Dataset<Row> build() {
    return spark
        .range(0, 400, 1, 2)
        .selectExpr(
            "IF(id % 13 = 0, NULL, CAST((id * 11) % 250 AS INT)) AS rk",
            "CONCAT('s', CAST(id % 5 AS STRING)) AS rk2", "id * 3 AS w");
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

  @TestFactory
  Stream<DynamicTest> everyJoinAnswersAsSparkDoesWithAndWithoutAdaptiveExecution() {
    List<DynamicTest> tests = new ArrayList<>();
    for (boolean adaptive : List.of(true, false)) {
      for (Query q : queries()) {
        tests.add(
            DynamicTest.dynamicTest(
                q.name() + ", adaptive execution " + (adaptive ? "on" : "off"),
                () -> assertSameAsSpark(q, adaptive)));
      }
    }
    return tests.stream();
  }

  private static void assertSameAsSpark(Query q, boolean adaptive) {
    spark.conf().set("spark.sql.adaptive.enabled", Boolean.toString(adaptive));
    Dataset<Row> buildSide = q.buildOf().apply(build());
    Dataset<Row> expected =
        q.buildsLeft() ? q.join().apply(buildSide, stream()) : q.join().apply(stream(), buildSide);
    Dataset<Row> mark = NpuGather.broadcastOnExecutors(buildSide);
    Dataset<Row> marked =
        q.buildsLeft() ? q.join().apply(mark, stream()) : q.join().apply(stream(), mark);
    String plan = marked.queryExecution().explainString(ExplainMode.fromString("simple"));
    assertTrue(plan.contains("ExecutorBuild"), plan);
    List<String> want = sorted(expected);
    for (int run = 0; run < 2; run++) { // the same query twice
      List<String> got =
          assertTimeoutPreemptively(Duration.ofSeconds(120), () -> sorted(marked), q::name);
      assertEquals(want, got, q.name());
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
  void aHintTheJoinCannotHonourLeavesSparksJoin() {
    Dataset<Row> full =
        stream()
            .join(
                NpuGather.broadcastOnExecutors(build()), col("k").equalTo(col("rk")), "full_outer");
    String plan = full.queryExecution().explainString(ExplainMode.fromString("simple"));
    assertFalse(plan.contains("ExecutorBuild"), plan);
    assertEquals(
        sorted(stream().join(build(), col("k").equalTo(col("rk")), "full_outer")), sorted(full));
  }

  @Test
  void aGatheredBuildSideJoinsLikeAnyOther() {
    Dataset<Row> gathered = NpuGather.allGatherOnNpu(build()).drop("source_rank");
    Dataset<Row> marked =
        stream().join(NpuGather.broadcastOnExecutors(gathered), col("k").equalTo(col("rk")));
    assertEquals(sorted(stream().join(gathered, col("k").equalTo(col("rk")))), sorted(marked));
  }

  private static List<String> sorted(Dataset<Row> df) {
    List<String> rows = new ArrayList<>();
    for (Row r : df.collectAsList()) {
      rows.add(r.toString());
    }
    rows.sort(null);
    return rows;
  }
}
