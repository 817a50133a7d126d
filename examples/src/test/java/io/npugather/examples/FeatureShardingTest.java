package io.npugather.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.examples.FeatureSharding.FlatTable;
import io.npugather.examples.FeatureSharding.Heap;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The feature-sharding job, small, on local[2]. */
class FeatureShardingTest {
  @Test
  void smallRunMatchesPlainSparkAndWritesTopKPerQuery(@TempDir Path output) throws Exception {
    FeatureSharding.Result result =
        FeatureSharding.run(
            "--master",
            "local[2]",
            "--items",
            "2000",
            "--dim",
            "16",
            "--queries",
            "50",
            "--top-k",
            "5",
            "--seed",
            "3",
            "--check",
            "20",
            "--output",
            output.toString());
    assertEquals(2, result.ranks());
    assertEquals(20, result.checkedQueries());
    assertTrue(result.checkPassed(), result.matchingQueries() + "/20 queries match");
    assertEquals(50L * 5, result.recommendationRows());
    assertTrue(result.passed());
    // The generated input is removed (no --keep); the recommendations stay.
    assertFalse(Files.exists(output.resolve("items")), "generated items left behind");
    assertFalse(Files.exists(output.resolve("queries")), "generated queries left behind");

    // The output as a user reads it: every query once per rank 1..k, best first.
    SparkSession spark =
        SparkSession.builder().master("local[1]").config("spark.ui.enabled", "false").getOrCreate();
    try {
      List<Row> rows =
          spark
              .read()
              .parquet(result.recommendations().toString())
              .orderBy("query_id", "rank")
              .collectAsList();
      assertEquals(250, rows.size());
      assertEquals(
          List.of("query_id", "item_id", "score", "rank"),
          List.of(spark.read().parquet(result.recommendations().toString()).columns()));
      for (int i = 0; i < rows.size(); i++) {
        Row row = rows.get(i);
        assertEquals(i / 5, row.getLong(0));
        assertEquals(i % 5 + 1, row.getInt(3));
        if (i % 5 > 0) {
          assertTrue(rows.get(i - 1).getFloat(2) >= row.getFloat(2), "best first");
        }
      }
    } finally {
      spark.stop();
    }
  }

  @Test
  void heapKeepsTheBestKWithTiesToTheSmallerId() {
    long[] ids = {10, 11, 12, 13, 14, 15};
    Heap heap = new Heap(3, ids);
    float[] scores = {1f, 5f, 3f, 5f, 4f, 3f};
    for (int i = 0; i < scores.length; i++) {
      if (scores[i] >= heap.threshold) {
        heap.offer(scores[i], i);
      }
    }
    List<Row> out = new ArrayList<>();
    heap.drainTo(99, out);
    assertEquals(List.of(11L, 13L, 14L), out.stream().map(r -> r.getLong(1)).toList());
    assertEquals(List.of(1, 2, 3), out.stream().map(r -> r.getInt(3)).toList());
  }

  @Test
  void topKIsTheBruteForceTopK() {
    int dim = 5;
    int n = 300;
    java.util.SplittableRandom random = new java.util.SplittableRandom(1);
    FlatTable items = FlatTable.load(rows(random, n, dim).iterator(), 0, 1, dim, 4, "item", 0);
    FlatTable queries = FlatTable.load(rows(random, 7, dim).iterator(), 0, 1, dim, 4, "query", 0);
    List<Row> out = new ArrayList<>();
    FeatureSharding.TopK.score(items, queries, 4, out);
    assertEquals(7 * 4, out.size());
    for (int q = 0; q < 7; q++) {
      List<long[]> all = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        float s = 0f;
        for (int j = 0; j < dim; j++) {
          s += queries.values[q * dim + j] * items.values[i * dim + j];
        }
        all.add(new long[] {Float.floatToIntBits(s), i});
      }
      all.sort(
          (a, b) ->
              Float.compare(Float.intBitsToFloat((int) b[0]), Float.intBitsToFloat((int) a[0])));
      for (int r = 0; r < 4; r++) {
        Row row = out.get(q * 4 + r);
        assertEquals(queries.ids[q], row.getLong(0));
        assertEquals(items.ids[(int) all.get(r)[1]], row.getLong(1));
        assertEquals(Float.intBitsToFloat((int) all.get(r)[0]), row.getFloat(2));
      }
    }
  }

  @Test
  void badOptionsAreRejectedNamingTheFlag() {
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class,
            () -> FeatureSharding.parse(new String[] {"--backend", "gpu"}));
    assertTrue(e.getMessage().contains("gpu"), e.getMessage());
    e =
        assertThrows(
            IllegalArgumentException.class,
            () -> FeatureSharding.parse(new String[] {"--items-path", "/x"}));
    assertTrue(e.getMessage().contains("--queries-path"), e.getMessage());
    e =
        assertThrows(
            IllegalArgumentException.class,
            () -> FeatureSharding.parse(new String[] {"--top-k", "0"}));
    assertTrue(e.getMessage().contains("--top-k"), e.getMessage());
  }

  /** Runs the command line, returning {exit code, stdout, stderr}. */
  private static Object[] commandLine(String... args) throws Exception {
    PrintStream out = System.out;
    PrintStream err = System.err;
    ByteArrayOutputStream stdout = new ByteArrayOutputStream();
    ByteArrayOutputStream stderr = new ByteArrayOutputStream();
    int code;
    try {
      System.setOut(new PrintStream(stdout, true, StandardCharsets.UTF_8));
      System.setErr(new PrintStream(stderr, true, StandardCharsets.UTF_8));
      code = FeatureSharding.runCommandLine(args);
    } finally {
      System.setOut(out);
      System.setErr(err);
    }
    return new Object[] {
      code, stdout.toString(StandardCharsets.UTF_8), stderr.toString(StandardCharsets.UTF_8)
    };
  }

  private static void assertOneErrorLine(Object[] run, String expected) {
    assertEquals(2, run[0], "exit code; stderr: " + run[2]);
    String stderr = (String) run[2];
    assertEquals(1, stderr.strip().lines().count(), "not one line:\n" + stderr);
    assertTrue(stderr.startsWith("error: ") && stderr.contains(expected), stderr);
    assertFalse(stderr.contains("Exception") || stderr.contains("\tat "), stderr);
  }

  @Test
  void moreRanksThanTheMastersSlotsFailBeforeAnyDataIsGeneratedNamingTheFlag(@TempDir Path output)
      throws Exception {
    Object[] run =
        commandLine("--master", "local[2]", "--ranks", "3", "--output", output.toString());
    assertOneErrorLine(run, "--ranks = 3, but local[2] runs at most 2 tasks at once");
    assertTrue(((String) run[2]).contains("pass --ranks 2 or fewer"), (String) run[2]);
    try (var files = Files.list(output)) {
      assertEquals(0, files.count(), "data generated before the check");
    }
    assertEquals(1, FeatureSharding.localSlots("local"));
    assertEquals(4, FeatureSharding.localSlots("local[4]"));
    assertEquals(3, FeatureSharding.localSlots("local[3,2]"));
    assertEquals(
        Runtime.getRuntime().availableProcessors(), FeatureSharding.localSlots("local[*]"));
    assertEquals(0, FeatureSharding.localSlots("spark://host:7077"));
  }

  @Test
  void badPathOrOptionIsOneLineWithoutStackTrace(@TempDir Path dir) throws Exception {
    assertOneErrorLine(
        commandLine(
            "--items-path", dir.resolve("nope").toString(), "--queries-path", dir.toString()),
        "--items-path = '" + dir.resolve("nope") + "': no such file or directory");
    assertOneErrorLine(commandLine("--ranks", "two"), "--ranks = 'two'; allowed: an integer");
    assertOneErrorLine(commandLine("--colour", "red"), "unknown option '--colour'");
  }

  @Test
  void keepKeepsTheGeneratedDataAndTheOutputHasNoTerminalControlCodes(@TempDir Path output)
      throws Exception {
    Object[] run =
        commandLine(
            "--master",
            "local[2]",
            "--items",
            "300",
            "--dim",
            "4",
            "--queries",
            "10",
            "--top-k",
            "3",
            "--check",
            "5",
            "--keep",
            "--output",
            output.toString());
    String stdout = (String) run[1];
    assertEquals(0, run[0], stdout + run[2]);
    assertTrue(
        Files.isDirectory(output.resolve("items")) && Files.isDirectory(output.resolve("queries")));
    assertTrue(stdout.contains("generated data kept"), stdout);
    assertTrue(stdout.contains("check: 5/5 queries match plain Spark"), stdout);
    // The phases against this machine's copy rate.
    assertTrue(
        stdout.matches(
            "(?s).*against memcpy +\\d+\\.\\d GB/s here \\(hot, one thread\\); per rank, conversion"
                + " \\d+\\.\\dx a memcpy of its partition \\(.*\\), collective \\d+\\.\\dx a memcpy of"
                + " what it received\n.*"),
        stdout);
    assertTrue(
        stdout.chars().noneMatch(c -> c < 0x20 && c != '\n'),
        "control characters (escape codes, carriage returns) in the output:\n" + stdout);
  }

  /**
   * {@code --scoring sql} (the queries joined with the gathered items by the ALLGATHER hint, top-k
   * by a window) writes exactly the recommendations of the arrays' scoring, row for row, and passes
   * the same check.
   */
  @Test
  void theSqlScoringWritesTheRecommendationsOfTheArraysScoring(@TempDir Path dir) {
    Path first = dir.resolve("arrays");
    Path second = dir.resolve("sql");
    String[] common = {"--master", "local[2]", "--top-k", "4", "--check", "5"};
    FeatureSharding.Result arrays =
        assertTimeoutPreemptively(
            Duration.ofSeconds(180),
            () ->
                FeatureSharding.run(
                    concat(
                        common,
                        "--items",
                        "1500",
                        "--dim",
                        "12",
                        "--queries",
                        "40",
                        "--seed",
                        "11",
                        "--keep",
                        "--output",
                        first.toString())));
    for (int run = 0; run < 2; run++) {
      Path output = second.resolve("run" + run);
      FeatureSharding.Result sql =
          assertTimeoutPreemptively(
              Duration.ofSeconds(180),
              () ->
                  FeatureSharding.run(
                      concat(
                          common,
                          "--scoring",
                          "sql",
                          "--items-path",
                          first.resolve("items").toString(),
                          "--queries-path",
                          first.resolve("queries").toString(),
                          "--output",
                          output.toString())));
      assertTrue(arrays.passed() && sql.passed(), sql.matchingQueries() + "/5 queries match");
      assertEquals(40L * 4, sql.recommendationRows());
      SparkSession spark =
          SparkSession.builder()
              .master("local[1]")
              .config("spark.ui.enabled", "false")
              .getOrCreate();
      try {
        assertEquals(
            recommendations(spark, arrays.recommendations()),
            recommendations(spark, sql.recommendations()));
      } finally {
        spark.stop();
      }
    }
  }

  /** The SQL scoring gathers the items onto the executors and shuffles nothing but the queries. */
  @Test
  void theSqlScoringJoinsWithTheGatheredItemsWithoutShufflingThePairs() {
    SparkSession spark =
        SparkSession.builder()
            .master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.extensions", "io.npugather.spark.NpuGatherExtensions")
            .config("spark.sql.adaptive.enabled", "false")
            .getOrCreate();
    try {
      org.apache.spark.sql.Dataset<Row> items =
          spark.range(0, 20, 1, 2).selectExpr("id", "array(CAST(id AS FLOAT)) AS embedding");
      org.apache.spark.sql.Dataset<Row> queries =
          spark.range(0, 6, 1, 2).selectExpr("id", "array(CAST(id AS FLOAT)) AS embedding");
      org.apache.spark.sql.Dataset<Row> top = SqlScoring.recommendations(spark, items, queries, 3);
      String plan =
          top.queryExecution()
              .explainString(org.apache.spark.sql.execution.ExplainMode.fromString("simple"));
      assertTrue(plan.contains("BroadcastNestedLoopJoin") && plan.contains("ExecutorBuild"), plan);
      // The queries' exchange by id alone: the items, in one partition per slot, are gathered
      // where they lie, and nothing exchanges the pairs.
      assertEquals(1, plan.split("Exchange ", -1).length - 1, plan);
      assertTrue(plan.contains("Exchange hashpartitioning(id#"), plan);
      List<Row> rows = assertTimeoutPreemptively(Duration.ofSeconds(120), top::collectAsList);
      assertEquals(18, rows.size());
      for (Row row : rows) {
        // Scores id * item: the best items are the largest ids, 19, 18, 17 (none for query 0 ties).
        long query = row.getLong(0);
        int rank = row.getInt(3);
        if (query > 0) {
          assertEquals(20 - rank, row.getLong(1), row.toString());
        }
      }
    } finally {
      spark.stop();
    }
  }

  private static List<String> recommendations(SparkSession spark, Path path) {
    List<String> rows = new ArrayList<>();
    for (Row row :
        spark
            .read()
            .parquet(path.toString())
            .orderBy("query_id", "rank")
            .selectExpr("query_id", "item_id", "CAST(score AS STRING)", "rank")
            .collectAsList()) {
      rows.add(row.toString());
    }
    return rows;
  }

  private static String[] concat(String[] first, String... rest) {
    String[] all = Arrays.copyOf(first, first.length + rest.length);
    System.arraycopy(rest, 0, all, first.length, rest.length);
    return all;
  }

  private static List<org.apache.spark.sql.catalyst.InternalRow> rows(
      java.util.SplittableRandom random, int n, int dim) {
    List<org.apache.spark.sql.catalyst.InternalRow> rows = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      float[] v = new float[dim];
      for (int j = 0; j < dim; j++) {
        v[j] = (float) (random.nextDouble() * 2 - 1);
      }
      rows.add(
          new org.apache.spark.sql.catalyst.expressions.GenericInternalRow(
              new Object[] {
                (long) (1000 + i), org.apache.spark.sql.catalyst.util.ArrayData.toArrayData(v)
              }));
    }
    return rows;
  }
}
