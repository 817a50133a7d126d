package io.npugather.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.spark.testing.GatherLeaks;
import io.npugather.spark.testing.LocalSpark;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.core.LogEvent;
import org.apache.logging.log4j.core.Logger;
import org.apache.logging.log4j.core.appender.AbstractAppender;
import org.apache.logging.log4j.core.config.Property;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec;
import org.apache.spark.sql.execution.metric.SQLMetric;
import org.apache.spark.sql.functions;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;
import scala.jdk.javaapi.CollectionConverters;

/** What Spark's UI and explain() show of a gather on the host backend, as a user sees it. */
class GatherInSparkUiTest {
  private static SparkSession spark;
  private static final Names NAMES = new Names();

  /** Stage names and job descriptions as the UI receives them. */
  static final class Names extends SparkListener {
    final List<String> stages = new ArrayList<>();
    final List<String> jobs = new ArrayList<>();

    @Override
    public synchronized void onStageSubmitted(SparkListenerStageSubmitted submitted) {
      stages.add(submitted.stageInfo().name());
    }

    @Override
    public synchronized void onJobStart(SparkListenerJobStart start) {
      Properties properties = start.properties();
      jobs.add(properties == null ? null : properties.getProperty("spark.job.description"));
    }

    synchronized void clear() {
      stages.clear();
      jobs.clear();
    }
  }

  /** The connector's log lines. */
  static final class LogLines extends AbstractAppender {
    final List<String> lines = java.util.Collections.synchronizedList(new ArrayList<>());

    LogLines() {
      super("npugather-lines", null, null, true, Property.EMPTY_ARRAY);
    }

    @Override
    public void append(LogEvent event) {
      if (event.getLoggerName().startsWith("io.npugather")) {
        lines.add(event.getMessage().getFormattedMessage());
      }
    }
  }

  @RegisterExtension
  static final LocalSpark SPARK =
      LocalSpark.cores(4)
          .shufflePartitions(4)
          .onStart(
              s -> {
                spark = s;
                s.sparkContext().addSparkListener(NAMES);
              });

  @AfterEach
  void arrowReleased() {
    GatherLeaks.awaitArrowReleased();
  }

  private static final Duration BOUND = Duration.ofSeconds(120);

  private static Dataset<Row> input() {
    return spark.range(0, 1000, 1, 4).toDF("id").withColumn("x", functions.col("id").multiply(0.5));
  }

  /** The gather node of an executed plan (after the action that ran it). */
  static NpuAllGatherExec gatherNode(SparkPlan plan) {
    if (plan instanceof AdaptiveSparkPlanExec adaptive) {
      return gatherNode(adaptive.executedPlan());
    }
    if (plan instanceof NpuAllGatherExec gather) {
      return gather;
    }
    for (SparkPlan child : CollectionConverters.asJava(plan.children())) {
      NpuAllGatherExec found = gatherNode(child);
      if (found != null) {
        return found;
      }
    }
    return null;
  }

  @Test
  void thePlanNodeCarriesRowsBytesTimesAndTheTransportAsSqlMetrics() {
    Dataset<Row> gathered = NpuGather.allGatherOnNpu(input());
    assertEquals(4 * 1000, gathered.collectAsList().size());

    NpuAllGatherExec node = gatherNode(gathered.queryExecution().executedPlan());
    assertNotNull(node, gathered.queryExecution().executedPlan().treeString());
    Map<String, SQLMetric> metrics = CollectionConverters.asJava(node.metrics());
    assertEquals(1000, metrics.get("numInputRows").value());
    assertEquals(4 * 1000, metrics.get("numOutputRows").value());
    long inputBytes = metrics.get("inputBytes").value();
    assertTrue(inputBytes >= 1000 * 16, "input size " + inputBytes);
    assertEquals(4 * inputBytes, metrics.get("outputBytes").value());
    // The ranks of local[4] share one executor: they gather one output there, sending nothing.
    assertEquals(0, metrics.get("bytesSent").value());
    for (String timing :
        List.of("conversionTime", "rendezvousTime", "slowestRankWait", "collectiveTime")) {
      assertTrue(metrics.get(timing).value() > 0, timing + " " + metrics.get(timing).value());
      assertEquals("nsTiming", metrics.get(timing).metricType(), timing);
    }
    assertEquals(4, metrics.get("ranksOver_executor").value());
    assertEquals("ranks over executor", metrics.get("ranksOver_executor").name().get());
    assertFalse(metrics.containsKey("ranksOver_hccl"), "another backend's transport: " + metrics);
    assertEquals(Map.of("executor", 4L), GatherMetrics.of(gathered).transports());

    // Each rank a copy of its own: the ranks of local[4], threads of one JVM, exchange directly.
    spark.conf().set("spark.npugather.output.onePerExecutor", "false");
    try {
      Dataset<Row> copies = NpuGather.allGatherOnNpu(input());
      assertEquals(4 * 1000, copies.collectAsList().size());
      Map<String, SQLMetric> perRank =
          CollectionConverters.asJava(gatherNode(copies.queryExecution().executedPlan()).metrics());
      assertEquals(3 * inputBytes, perRank.get("bytesSent").value());
      assertEquals(4, perRank.get("ranksOver_threads").value());
      assertEquals(Map.of("threads", 4L), GatherMetrics.of(copies).transports());
    } finally {
      spark.conf().unset("spark.npugather.output.onePerExecutor");
    }
  }

  /**
   * A gather's figures are its plan node's: every DataFrame made from it adds its runs to them, and
   * another gather, before or after, changes nothing in them.
   */
  @Test
  void eachGatherKeepsItsOwnFiguresWhichTheDataFramesMadeFromItAddTo() {
    Dataset<Row> first = NpuGather.allGatherOnNpu(input());
    Dataset<Row> perRank = first.groupBy("source_rank").count();
    GatherMetrics figures = GatherMetrics.of(first);
    assertSame(figures, GatherMetrics.of(perRank));
    assertEquals(0, figures.rowsGathered(), "before any action");
    assertTimeoutPreemptively(BOUND, () -> assertEquals(4, perRank.collectAsList().size()));
    assertEquals(4 * 1000, figures.rowsGathered());
    assertEquals(Map.of("executor", 4L), figures.transports());

    Dataset<Row> second = NpuGather.allGatherOnNpu(spark.range(0, 100, 1, 2).toDF());
    assertTimeoutPreemptively(BOUND, () -> assertEquals(2 * 100, second.collectAsList().size()));
    assertEquals(2 * 100, GatherMetrics.of(second).rowsGathered());
    assertEquals(4 * 1000, figures.rowsGathered(), "the first gather's, unchanged");

    // An action that gathers again adds its run.
    assertTimeoutPreemptively(BOUND, () -> assertEquals(4 * 1000, first.count()));
    assertEquals(2 * 4 * 1000, figures.rowsGathered());
  }

  @Test
  void figuresAreAskedOfADataFrameWithExactlyOneGather() {
    IllegalArgumentException none =
        assertThrows(IllegalArgumentException.class, () -> GatherMetrics.of(input()));
    assertTrue(none.getMessage().startsWith("gathered holds no gather"), none.getMessage());
    Dataset<Row> two =
        NpuGather.allGatherOnNpu(input())
            .crossJoin(NpuGather.allGatherOnNpu(input()).withColumnRenamed("id", "other"));
    IllegalArgumentException several =
        assertThrows(IllegalArgumentException.class, () -> GatherMetrics.of(two));
    assertEquals("gathered holds 2 gathers; pass the DataFrame of each", several.getMessage());
    Dataset<Row> gathered = NpuGather.allGatherOnNpu(input());
    assertSame(GatherMetrics.of(gathered), GatherMetrics.of(gathered.join(gathered, "id")));
  }

  @Test
  void theBarrierStageSaysWhatRunsWithNoDeviceWordsOnTheHostBackend() throws Exception {
    NAMES.clear();
    LogLines log = new LogLines();
    log.start();
    Logger root = (Logger) LogManager.getRootLogger();
    root.addAppender(log);
    try {
      spark.conf().set("spark.npugather.output.onePerExecutor", "false"); // ranks exchange
      NpuGather.allGatherOnNpu(input(), Map.of("npugather.hostTransport", "staging")).count();
    } finally {
      spark.conf().unset("spark.npugather.output.onePerExecutor");
      root.removeAppender(log);
    }
    List<String> lines = List.copyOf(log.lines);
    assertTrue(
        lines.stream().anyMatch(l -> l.contains("gathered 1000 rows over staging")),
        lines.toString());
    for (String line : lines) {
      assertFalse(line.matches("(?is).*\\b(device|npu)\\b.*"), line);
    }
    spark.sparkContext().listenerBus().waitUntilEmpty();
    List<String> stages;
    synchronized (NAMES) {
      stages = List.copyOf(NAMES.stages);
    }
    assertTrue(
        stages.contains("allGatherOnNpu: 4 ranks, backend host (staging)"), stages.toString());

    NAMES.clear();
    List<Integer> ranks = NpuGather.onRanks(input(), List.of("x"), (rank, gathered) -> rank);
    assertEquals(List.of(0, 1, 2, 3), ranks);
    spark.sparkContext().listenerBus().waitUntilEmpty();
    synchronized (NAMES) {
      assertEquals(List.of("onRanks: 4 ranks, backend host"), NAMES.stages);
      assertEquals(java.util.Arrays.asList("onRanks: 4 ranks, backend host"), NAMES.jobs);
    }
    assertEquals(null, spark.sparkContext().getLocalProperty("spark.job.description"));

    assertEquals(
        "AllGatherOptions{backend=host, hostTransport=STAGING}",
        AllGatherOptions.defaults()
            .withHostTransport(io.npugather.CommunicatorOptions.HostTransport.STAGING)
            .toString());
    String options = AllGatherOptions.defaults().toString();
    assertFalse(options.toLowerCase().contains("npu") || options.contains("device"), options);
  }

  private static String explain(Dataset<Row> df) {
    return df.queryExecution().explainString(org.apache.spark.sql.execution.SimpleMode$.MODULE$);
  }

  @Test
  void explainShowsTheGatherOverItsInputWithoutConversionsThatDoNotRun() {
    Dataset<Row> gathered = NpuGather.allGatherOnNpu(input(), Map.of("timeout", "60s"));
    String[] lines = explain(gathered).split("\n");
    assertEquals("== Physical Plan ==", lines[0]);
    assertTrue(
        lines[1].matches("NpuAllGather source_rank#\\d+, backend=host, timeout=1m"), lines[1]);
    assertTrue(lines[2].startsWith("+- *(1) Project [id#"), lines[2]);
    assertFalse(String.join("\n", lines).contains("RowToColumnar"), String.join("\n", lines));
    assertEquals(4 * 1000, gathered.collectAsList().size());
    assertEquals("rows", GatherMetrics.of(gathered).input());
  }

  @Test
  void explainShowsAVectorizedScanUnderTheGatherWithoutColumnarToRow(@TempDir Path dir) {
    String path = dir.resolve("input").toString();
    input().write().parquet(path);
    Dataset<Row> scan = spark.read().parquet(path);
    int ranks = scan.rdd().getNumPartitions();
    Dataset<Row> gathered = NpuGather.allGatherOnNpu(scan);
    String plan = explain(gathered);
    assertTrue(plan.contains("\n+- FileScan parquet"), plan);
    assertFalse(plan.contains("ColumnarToRow") || plan.contains("RowToColumnar"), plan);
    assertEquals(ranks * 1000, gathered.collectAsList().size());
    assertEquals("columnar batches", GatherMetrics.of(gathered).input());
  }
}
