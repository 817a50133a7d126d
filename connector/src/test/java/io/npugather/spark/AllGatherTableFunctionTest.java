package io.npugather.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.spark.testing.GatherLeaks;
import io.npugather.spark.testing.LocalSpark;
import io.npugather.spark.testing.RankMajor;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@code all_gather_on_npu(TABLE(t), option => value ...)}, the SQL form of {@code allGatherOnNpu}
 * that the SQL extension registers: the same rows on every rank, the same options and the same
 * errors as {@link NpuGather#allGatherOnNpu(Dataset, Map)}, in Spark local[4], backend host.
 */
class AllGatherTableFunctionTest {
  private static final Duration BOUND = Duration.ofMinutes(3);

  @RegisterExtension
  static final LocalSpark SPARK =
      LocalSpark.cores(4).shufflePartitions(3).utc().withExtensions().onStart(s -> spark = s);

  private static SparkSession spark;

  @AfterEach
  void nothingLeftInArrow() {
    spark.conf().unset("spark.sql.adaptive.enabled");
    spark.catalog().dropTempView("items");
    GatherLeaks.awaitArrowReleased();
  }

  /** Random items of several column types (nulls included) over 3 partitions, as the view items. */
  private static Dataset<Row> items(long seed) {
    Random random = new Random(seed);
    String values =
        IntStream.range(0, 300)
            .mapToObj(
                n ->
                    String.format(
                        "(%d, %s, %s, %s, array(%sf, %sf), date'2024-01-%02d')",
                        n,
                        random.nextInt(5) == 0 ? "null" : Double.toString(random.nextDouble()),
                        random.nextInt(5) == 0 ? "null" : "'s" + random.nextInt(1000) + "é'",
                        random.nextInt(5) == 0
                            ? "null"
                            : "cast(" + random.nextInt(1_000_000) + " / 1000 as decimal(12, 3))",
                        random.nextFloat(),
                        random.nextFloat(),
                        1 + n % 28))
            .collect(Collectors.joining(", "));
    Dataset<Row> df =
        spark
            .sql("SELECT * FROM VALUES " + values + " AS t(id, score, name, price, embedding, day)")
            .repartition(3);
    df.createOrReplaceTempView("items");
    return df;
  }

  /** Each output partition's rows, in their order there. */
  private static List<List<Row>> partitions(Dataset<Row> df) {
    return df.javaRDD().glom().collect();
  }

  private static Dataset<Row> sql(String query) {
    return assertTimeoutPreemptively(BOUND, () -> spark.sql(query));
  }

  @Test
  void aTableArgumentGivesTheDataFrameApisRowsOnEveryRank() {
    Dataset<Row> df = items(1);
    Dataset<Row> gathered = sql("SELECT * FROM all_gather_on_npu(TABLE(items))");

    assertEquals(
        List.of("source_rank", "id", "score", "name", "price", "embedding", "day"),
        List.of(gathered.columns()));
    assertTimeoutPreemptively(
        BOUND,
        () -> {
          RankMajor.assertOnEveryPartition(df, gathered);
          assertEquals(partitions(NpuGather.allGatherOnNpu(df)), partitions(gathered));
        });
  }

  @Test
  void aQueryArgumentAndSqlAroundTheCallWork() {
    items(2);
    Dataset<Row> counts =
        sql(
            "SELECT source_rank, count(*) AS n, sum(id) AS ids FROM all_gather_on_npu("
                + "TABLE (SELECT id, name FROM items WHERE id < 100), timeout => '60s')"
                + " GROUP BY source_rank ORDER BY source_rank");
    Dataset<Row> input = spark.sql("SELECT id, name FROM items WHERE id < 100");
    Dataset<Row> expected =
        NpuGather.allGatherOnNpu(input, Map.of("timeout", "60s"))
            .groupBy("source_rank")
            .agg(
                org.apache.spark.sql.functions.count("*").as("n"),
                org.apache.spark.sql.functions.sum("id").as("ids"))
            .orderBy("source_rank");
    assertTimeoutPreemptively(
        BOUND, () -> assertEquals(expected.collectAsList(), counts.collectAsList()));
    // Each of 4 ranks holds the 100 rows.
    Dataset<Row> count =
        sql(
            "SELECT count(*) FROM all_gather_on_npu(TABLE(items), rankSize => 4)"
                + " WHERE id < 100");
    assertTimeoutPreemptively(BOUND, () -> assertEquals(4L * 100, count.first().getLong(0)));
  }

  @Test
  void optionsByNameAreTheDataFrameApisKeysInAnyCase() {
    Dataset<Row> df = items(3);
    Dataset<Row> gathered =
        sql(
            "SELECT * FROM all_gather_on_npu(TABLE(items), RANKSIZE => 2,"
                + " sourceRankColumn => 'from_rank', backend => 'host', timeout => '60s',"
                + " retryable => true, hostTransport => 'auto')");
    Dataset<Row> expected =
        NpuGather.allGatherOnNpu(
            df,
            Map.of(
                "rankSize", "2",
                "sourceRankColumn", "from_rank",
                "backend", "host",
                "timeout", "60s",
                "retryable", "true",
                "hostTransport", "auto"));
    assertEquals("from_rank", gathered.columns()[0]);
    assertTimeoutPreemptively(
        BOUND,
        () -> {
          List<List<Row>> got = partitions(gathered);
          assertEquals(2, got.size());
          // Round-robin repartitioning has no order to compare; the rows and ranks are the same.
          for (List<Row> rank : got) {
            assertEquals(sorted(partitions(expected).get(0)), sorted(rank));
          }
        });
  }

  private static List<String> sorted(List<Row> rows) {
    return rows.stream().map(Row::toString).sorted().toList();
  }

  @Test
  void theSessionsDefaultsApply() {
    items(4);
    spark.conf().set("spark.npugather.sourceRankColumn", "origin");
    try {
      assertEquals("origin", sql("SELECT * FROM all_gather_on_npu(TABLE(items))").columns()[0]);
    } finally {
      spark.conf().unset("spark.npugather.sourceRankColumn");
    }
  }

  @Test
  void aCachedTableIsGatheredFromItsCachedBytesWithTheSameRows() {
    Dataset<Row> df = items(5).select("id", "score");
    df.createOrReplaceTempView("items");
    df.cache();
    try {
      assertTimeoutPreemptively(
          BOUND,
          () -> {
            df.count();
            Dataset<Row> gathered = sql("SELECT * FROM all_gather_on_npu(TABLE(items))");
            RankMajor.assertOnEveryPartition(df, gathered);
            assertEquals("cached batches", GatherMetrics.of(gathered).input());
            assertEquals(partitions(NpuGather.allGatherOnNpu(df)), partitions(gathered));
          });
    } finally {
      df.unpersist(true);
    }
  }

  @ParameterizedTest(name = "spark.sql.adaptive.enabled={0}")
  @ValueSource(booleans = {true, false})
  void aShuffledInputGivesTheDataFrameApisRowsWithAndWithoutAdaptiveExecution(boolean adaptive) {
    spark.conf().set("spark.sql.adaptive.enabled", Boolean.toString(adaptive));
    items(6);
    String query = "SELECT id % 7 AS k, count(*) AS n, max(name) AS name FROM items GROUP BY 1";
    Dataset<Row> input = spark.sql(query);
    Dataset<Row> gathered = sql("SELECT * FROM all_gather_on_npu(TABLE (" + query + "))");
    assertTimeoutPreemptively(
        BOUND,
        () -> {
          List<List<Row>> expected = partitions(NpuGather.allGatherOnNpu(input));
          List<List<Row>> got = partitions(gathered);
          assertEquals(expected.size(), got.size());
          for (int rank = 0; rank < got.size(); rank++) {
            assertEquals(7, got.get(rank).size(), "rank " + rank);
            assertEquals(sorted(expected.get(rank)), sorted(got.get(rank)), "rank " + rank);
          }
        });
  }

  /** A refused option: the message of the DataFrame API, at the query, before any job. */
  @ParameterizedTest(name = "{0} => {1}")
  @CsvSource(
      delimiter = '|',
      quoteCharacter = '"',
      value = {
        "timeout|'soon'|soon",
        "rankSize|65537|65537",
        "backend|'nccl'|nccl",
        "bakend|'host'|host",
        "sourceRankColumn|'ID'|ID",
        "retryable|'yes'|yes"
      })
  void aRefusedOptionFailsTheQueryWithTheDataFrameApisError(
      String name, String sqlValue, String value) {
    Dataset<Row> df = items(7);
    IllegalArgumentException expected =
        assertThrows(
            IllegalArgumentException.class,
            () -> NpuGather.allGatherOnNpu(df, Map.of(name, value)));
    IllegalArgumentException refused =
        assertThrows(
            IllegalArgumentException.class,
            () ->
                sql(
                    "SELECT * FROM all_gather_on_npu(TABLE(items), "
                        + name
                        + " => "
                        + sqlValue
                        + ")"));
    assertEquals(expected.getMessage(), refused.getMessage());
  }

  @Test
  void aRootBeyondThePartitionsIsRefusedAtTheQuery() {
    items(8);
    IllegalArgumentException refused =
        assertThrows(
            IllegalArgumentException.class,
            () -> sql("SELECT * FROM all_gather_on_npu(TABLE(items), rankRoot => 3)"));
    assertEquals(
        "npugather.rankRoot = 3 is invalid; allowed: 0 <= rankRoot < rankSize (3)",
        refused.getMessage());
    assertTimeoutPreemptively(
        BOUND,
        () ->
            assertEquals(
                900L, sql("SELECT * FROM all_gather_on_npu(TABLE(items), rankRoot => 2)").count()));
  }

  /** SQL that is no call of the function: one line naming the argument and what is allowed. */
  @ParameterizedTest(name = "{0}")
  @CsvSource(
      delimiter = '|',
      quoteCharacter = '"',
      value = {
        "TABLE(items), 'host'|argument 2 ('host') has no name; options are named, as in"
            + " backend => 'host'; allowed names: backend, rankSize, rankRoot,",
        "TABLE(items), timeout => '1s', TIMEOUT => '2s'|option timeout is given twice",
        "TABLE(items), timeout => cast(rand() as string)|option timeout => CAST(rand(",
        "TABLE(items), timeout => NULL|option timeout => NULL is invalid; allowed: a value",
        "TABLE(items) PARTITION BY id|TABLE ... PARTITION BY, WITH SINGLE PARTITION and ORDER BY"
            + " are not supported",
        "TABLE(items) WITH SINGLE PARTITION|TABLE ... PARTITION BY, WITH SINGLE PARTITION",
        "1|its first argument must be the table to gather, TABLE(name) or TABLE(SELECT ...); got 1",
        "TABLE(items), TABLE(items)|argument 2 is a second TABLE argument",
      })
  void aCallThatIsNotOneTableAndNamedConstantsIsRefusedNamingTheArgument(
      String arguments, String message) {
    items(9);
    IllegalArgumentException refused =
        assertThrows(
            IllegalArgumentException.class,
            () -> sql("SELECT * FROM all_gather_on_npu(" + arguments + ")"));
    assertTrue(
        refused.getMessage().startsWith("all_gather_on_npu: ")
            && refused.getMessage().contains(message),
        refused.getMessage());
  }

  @Test
  void describeFunctionShowsItsUsage() {
    List<String> lines =
        sql("DESCRIBE FUNCTION EXTENDED all_gather_on_npu").collectAsList().stream()
            .map(row -> row.getString(0))
            .toList();
    assertTrue(
        lines.stream().anyMatch(line -> line.contains("all_gather_on_npu(TABLE(t)")),
        lines.toString());
  }
}
