package io.npugather.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.AllGatherParam;
import io.npugather.DType;
import io.npugather.spark.testing.JobCounter;
import io.npugather.spark.testing.LocalSpark;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.function.Executable;

/**
 * Every bad input of allGatherOnNpu and onRanks is refused when the call is made (or, for what only
 * the plan knows, when it is planned), before any Spark job, naming the parameter, the value and
 * what is allowed in the operator's words: no task ever starts to fail on it.
 */
class RefusedBeforeAnyJobTest {
  private static final JobCounter JOBS = new JobCounter();

  @RegisterExtension
  static final LocalSpark SPARK =
      LocalSpark.cores(2)
          .withFirstCall()
          .onStart(
              s -> {
                spark = s;
                s.sparkContext().addSparkListener(JOBS);
              });

  private static SparkSession spark;

  @Test
  void aRankSizeAboveTheOperatorsLimitIsRefusedAtTheCallInTheOperatorsWords() throws Exception {
    String operator =
        assertThrows(
                IllegalArgumentException.class,
                () -> AllGatherParam.builder().rankSize(65537).build().validate())
            .getMessage();
    assertEquals(
        "AllGatherParam.rankSize = 65537 is invalid; allowed: 1 <= rankSize <= 65536", operator);
    String expected =
        "npugather.rankSize = 65537 is invalid; allowed: 0 (one rank per partition) or"
            + " 1 <= rankSize <= 65536";
    Dataset<Row> df = spark.range(0, 4, 1, 2).toDF();
    assertRefusedBeforeAnyJob(
        expected, () -> NpuGather.allGatherOnNpu(df, Map.of("npugather.rankSize", "65537")));
    assertRefusedBeforeAnyJob(
        expected, () -> AllGatherOptions.defaults().withRankSize(AllGatherParam.MAX_RANK_SIZE + 1));
    assertRefusedBeforeAnyJob(
        "spark." + expected, () -> spark.conf().set("spark.npugather.rankSize", "65537"));
    assertEquals(65536, AllGatherOptions.defaults().withRankSize(65536).rankSize());
    assertRefusedBeforeAnyJob(
        "npugather.rankRoot = 65536 is invalid; allowed: 0 <= rankRoot < rankSize <= 65536",
        () -> NpuGather.allGatherOnNpu(df, Map.of("npugather.rankRoot", "65536")));
  }

  @Test
  void aRootRankBeyondTheRanksOfTheInputIsRefusedAtTheCall() throws Exception {
    Dataset<Row> df = spark.range(0, 4, 1, 2).toDF();
    assertRefusedBeforeAnyJob(
        "npugather.rankRoot = 2 is invalid; allowed: 0 <= rankRoot < rankSize (2)",
        () -> NpuGather.allGatherOnNpu(df, Map.of("rankRoot", "2")));
    assertRefusedBeforeAnyJob(
        "npugather.rankRoot = 3 is invalid; allowed: 0 <= rankRoot < rankSize (3)",
        () -> NpuGather.allGatherOnNpu(df, Map.of("rankSize", "3", "npugather.rankRoot", "3")));
    assertRefusedBeforeAnyJob(
        "npugather.rankRoot = 2 is invalid; allowed: 0 <= rankRoot < rankSize (2)",
        () ->
            NpuGather.onRanks(
                df,
                List.of("id"),
                AllGatherOptions.defaults().withRankRoot(2),
                io.npugather.DType.FLOAT32,
                (rank, gathered) -> rank));
  }

  @Test
  void anInputOfMoreRanksThanTheOperatorAllowsIsRefusedBeforeTheSlotCheck() throws Exception {
    Dataset<Row> wide = spark.range(0, 65537, 1, 65537).toDF();
    String expected =
        ": the input has 65537 partitions, one rank each, and rankSize = 65537 is invalid;"
            + " allowed: 1 <= rankSize <= 65536 (set npugather.rankSize to repartition the input to"
            + " fewer ranks)";
    assertRefusedBeforeAnyJob(
        "allGatherOnNpu" + expected, () -> NpuGather.allGatherOnNpu(wide).collectAsList());
    assertRefusedBeforeAnyJob(
        "onRanks" + expected,
        () ->
            NpuGather.onRanks(
                wide.selectExpr("cast(id as float) as x"),
                List.of("x"),
                AllGatherOptions.defaults(),
                DType.FLOAT32,
                (rank, gathered) -> rank));
  }

  @Test
  void aTimeoutOfMoreThan30DaysIsRefusedNamingTheValueAsWritten() throws Exception {
    Dataset<Row> df = spark.range(0, 4, 1, 2).toDF();
    String allowed =
        " is invalid; allowed: a positive duration of at most 30 days (720h), such as 120s, 5m or"
            + " 500ms";
    assertRefusedBeforeAnyJob(
        "npugather.timeout = '99999999999d'" + allowed,
        () -> NpuGather.allGatherOnNpu(df, Map.of("npugather.timeout", "99999999999d")));
    assertRefusedBeforeAnyJob(
        "timeout = '721h'" + allowed,
        () -> AllGatherOptions.defaults().with(Map.of("timeout", "721h")));
    assertRefusedBeforeAnyJob(
        "spark.npugather.timeout = '31d'" + allowed,
        () -> spark.conf().set("spark.npugather.timeout", "31d"));
    assertRefusedBeforeAnyJob(
        "npugather.timeout = '-5s'" + allowed,
        () -> AllGatherOptions.defaults().with(Map.of("npugather.timeout", "-5s")));
    assertRefusedBeforeAnyJob(
        "npugather.timeout = 2592000001ms" + allowed,
        () -> AllGatherOptions.defaults().withTimeout(Duration.ofDays(30).plusMillis(1)));
    assertEquals(
        Duration.ofDays(30),
        AllGatherOptions.defaults().with(Map.of("timeout", "30d")).timeout(),
        "the longest timeout");
  }

  @Test
  void aCommDomainWithANulIsRefusedAtTheCallInTheOperatorsWords() throws Exception {
    String operator =
        assertThrows(
                IllegalArgumentException.class,
                () ->
                    AllGatherParam.builder()
                        .backend("host")
                        .rankSize(2)
                        .commDomain("job\0a")
                        .build()
                        .validate())
            .getMessage();
    String prefix = "AllGatherParam.commDomain";
    assertTrue(operator.startsWith(prefix + " = "), operator);
    Dataset<Row> df = spark.range(0, 4, 1, 2).toDF();
    assertRefusedBeforeAnyJob(
        "npugather.commDomain" + operator.substring(prefix.length()),
        () -> NpuGather.allGatherOnNpu(df, Map.of("npugather.commDomain", "job\0a")));
    assertRefusedBeforeAnyJob(
        "commDomain" + operator.substring(prefix.length()),
        () -> AllGatherOptions.defaults().with(Map.of("commDomain", "job\0a")));
  }

  @Test
  void aCommDomainIsMeasuredInUtf8BytesAsTheOperatorMeasuresIt() throws Exception {
    Dataset<Row> df = spark.range(0, 4, 1, 2).toDF();
    assertRefusedBeforeAnyJob(
        "npugather.commDomain = of 98 UTF-8 bytes is invalid; allowed: at most 96 UTF-8 bytes (a"
            + " run suffix is added)",
        () -> NpuGather.allGatherOnNpu(df, Map.of("npugather.commDomain", "é".repeat(49))));
    // The longest domain the option takes, with the run's suffix, is one the operator takes.
    Dataset<Row> gathered =
        NpuGather.allGatherOnNpu(df, Map.of("npugather.commDomain", "é".repeat(48)));
    assertEquals(8, gathered.collectAsList().size());
  }

  @Test
  void aSourceRankColumnNamedLikeAnInputColumnIsRefusedAtTheCall() throws Exception {
    Dataset<Row> df = spark.range(0, 4, 1, 2).toDF();
    assertRefusedBeforeAnyJob(
        "sourceRankColumn 'ID' collides with input column 'id'; choose another name for the"
            + " source-rank column",
        () -> NpuGather.allGatherOnNpu(df, Map.of("npugather.sourceRankColumn", "ID")));
  }

  @Test
  void onRanksWithoutColumnsOrWithOneOfAnotherTypeIsRefusedAtTheCall() throws Exception {
    Dataset<Row> df = spark.range(0, 4, 1, 2).selectExpr("cast(id as float) as x", "'a' as s");
    assertRefusedBeforeAnyJob(
        "onRanks: columns is empty; allowed: numeric columns (float, double, int, bigint,"
            + " smallint, tinyint) or one array<float> column",
        () -> NpuGather.onRanks(df, List.of(), (rank, gathered) -> rank));
    assertRefusedBeforeAnyJob(
        "onRanks: column 's' is string; allowed: float, double, int, bigint, smallint, tinyint, or"
            + " a single array<float> column",
        () -> NpuGather.onRanks(df, List.of("x", "s"), (rank, gathered) -> rank));
  }

  @Test
  void anInjectedFailureOfANumberBeyondAnIntIsRefusedAtTheCall() throws Exception {
    Dataset<Row> df = spark.range(0, 4, 1, 2).toDF();
    assertRefusedBeforeAnyJob(
        "npugather.test.injectFailure = '9999999999' is invalid; allowed: \"\", \"RANK\" or"
            + " \"RANK:ATTEMPT\" (each at most 9 digits)",
        () -> NpuGather.allGatherOnNpu(df, Map.of("npugather.test.injectFailure", "9999999999")));
  }

  /**
   * Runs {@code call}, which must throw an {@link IllegalArgumentException} with exactly {@code
   * message} (the cause's, when Spark wraps it) without a Spark job having started.
   */
  private static void assertRefusedBeforeAnyJob(String message, Executable call) throws Exception {
    int before = JOBS.get();
    Throwable e = assertThrows(Throwable.class, call);
    Throwable refused = e;
    while (!(refused instanceof IllegalArgumentException) && refused.getCause() != null) {
      refused = refused.getCause();
    }
    assertTrue(refused instanceof IllegalArgumentException, () -> describe(e));
    assertEquals(message, refused.getMessage());
    // The listener bus delivers in order: once this marker job is seen, any job before it was.
    new JavaSparkContext(spark.sparkContext()).parallelize(List.of(1), 1).count();
    long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (JOBS.get() < before + 1 && System.nanoTime() < until) {
      Thread.sleep(10);
    }
    assertEquals(before + 1, JOBS.get(), () -> "a job ran before the refusal: " + describe(e));
  }

  private static String describe(Throwable e) {
    StringBuilder all = new StringBuilder();
    for (Throwable t = e; t != null; t = t.getCause()) {
      all.append(t).append(" | ");
    }
    return all.toString();
  }
}
