package io.npugather.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.spark.NpuGather;
import java.lang.ref.Reference;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.ui.SQLExecutionUIData;
import org.apache.spark.sql.execution.ui.SparkPlanGraphWrapper;
import org.apache.spark.status.ExecutorStageSummaryWrapper;
import org.apache.spark.status.JobDataWrapper;
import org.apache.spark.status.RDDOperationGraphWrapper;
import org.apache.spark.status.RDDStorageInfoWrapper;
import org.apache.spark.status.StageDataWrapper;
import org.apache.spark.status.TaskDataWrapper;
import org.apache.spark.util.AccumulatorContext;
import org.apache.spark.util.kvstore.KVStore;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Many small gathers in one session, on two executor JVMs: after a warm-up, the driver and the
 * executors hold no more of the connector's objects, threads or file descriptors than before, and
 * their heaps after a full collection stay within a bound. Spark's own status store keeps the last
 * few jobs, stages, SQL executions and generated classes here (its defaults keep 100 to 1000 of
 * each, which a short soak never reaches, so their growth would hide the connector's).
 *
 * <p>{@code -Dnpugather.soak.gathers=2000} runs the long form (docs/operations.md, "Long
 * sessions"); {@code -Dnpugather.soak.retained=0} keeps Spark's defaults. Each sample's figures and
 * the classes that grew most are printed (the test's output file under {@code
 * target/surefire-reports}).
 */
class LongSessionSoakTest {
  private static final int GATHERS = Integer.getInteger("npugather.soak.gathers", 60);
  private static final int RETAINED = Integer.getInteger("npugather.soak.retained", 10);
  private static final int SAMPLES = Integer.getInteger("npugather.soak.samples", 2);

  /** Gathers before the baseline: Spark's status store full, every lazy cache filled. */
  private static final int WARM_UP = Math.max(2 * RETAINED + 10, 30);

  /** Live heap a JVM may gain over the soak without it counting as growth. */
  private static final long HEAP_SLACK_BYTES = 4L << 20;

  /** Threads and file descriptors a JVM may gain (Spark's pools grow and shrink on their own). */
  private static final int THREAD_SLACK = 8;

  private static final int FD_SLACK = 8;

  private static final int ROWS_PER_RANK = 64;

  @AutoClose private static SparkCluster cluster;

  @BeforeAll
  static void startCluster() {
    Map<String, String> conf = new HashMap<>();
    if (RETAINED > 0) {
      conf.put("spark.ui.retainedJobs", String.valueOf(RETAINED));
      conf.put("spark.ui.retainedStages", String.valueOf(RETAINED));
      conf.put("spark.sql.ui.retainedExecutions", String.valueOf(RETAINED));
      conf.put("spark.ui.dagGraph.retainedRootRDDs", String.valueOf(RETAINED));
      // Each gather's query is new code (a literal differs), cached up to this many entries.
      conf.put("spark.sql.codegen.cache.maxEntries", String.valueOf(RETAINED));
    }
    cluster = SparkCluster.start("LongSessionSoakTest", 2, conf);
  }

  @Test
  void manySmallGathersInOneSessionLeaveNothingOfTheConnectorBehind() {
    Duration bound = Duration.ofSeconds(90 + GATHERS);
    assertTimeoutPreemptively(bound, () -> cluster.explainFailure(this::soak));
  }

  private void soak() {
    SparkSession spark = cluster.spark();
    for (int i = 0; i < WARM_UP; i++) {
      gatherAndCheck(spark, i);
    }
    // Every sample is taken while this test holds exactly one earlier sample (its histograms
    // are megabytes of the driver's heap): the baseline while it holds a first one, the others
    // while it holds the baseline.
    Sample held = Sample.take(cluster);
    Sample start = Sample.take(cluster);
    Reference.reachabilityFence(held);
    held = null; // an unused local still holds it in the interpreter
    print("after " + WARM_UP + " gathers (warm-up)", start, start);
    Sample end = null;
    int done = 0;
    for (int s = 1; s <= SAMPLES; s++) {
      int until = GATHERS * s / SAMPLES;
      for (; done < until; done++) {
        gatherAndCheck(spark, WARM_UP + done);
      }
      end = null; // not held while the next one is taken
      end = Sample.take(cluster);
      print("after " + (WARM_UP + done) + " gathers", start, end);
    }

    assertFlat("driver", start.driver, end.driver);
    assertEquals(start.listeners, end.listeners, "listeners on the driver's bus");
    assertEquals(start.executors.size(), end.executors.size(), "executors");
    for (int e = 0; e < end.executors.size(); e++) {
      assertFlat("executor " + e, start.executors.get(e), end.executors.get(e));
    }
  }

  /** One small gather whose every row is checked: 2 ranks of {@value #ROWS_PER_RANK} rows. */
  private static void gatherAndCheck(SparkSession spark, int i) {
    long first = (long) i * 2 * ROWS_PER_RANK;
    List<Row> got =
        NpuGather.allGatherOnNpu(
                spark
                    .range(first, first + 2 * ROWS_PER_RANK, 1, 2)
                    .selectExpr("id", "id * 7 + " + i + " as v"))
            .collectAsList();
    List<Row> rankMajor = new ArrayList<>();
    for (int rank = 0; rank < 2; rank++) {
      for (long id = first + (long) rank * ROWS_PER_RANK;
          id < first + (rank + 1L) * ROWS_PER_RANK;
          id++) {
        rankMajor.add(RowFactory.create(rank, id, id * 7 + i));
      }
    }
    List<Row> expected = new ArrayList<>(rankMajor);
    expected.addAll(rankMajor); // output partitions 0 and 1, each every row
    assertEquals(expected, got, "gather " + i);
  }

  private static void assertFlat(String jvm, JvmSample start, JvmSample end) {
    Map<String, String> grown = new TreeMap<>();
    Map<String, Long> before = start.connectorInstances();
    end.connectorInstances()
        .forEach(
            (c, n) -> {
              long was = before.getOrDefault(c, 0L);
              if (n > was) {
                grown.put(c, was + " -> " + n);
              }
            });
    assertEquals(Map.of(), grown, jvm + ": the connector's live objects grew");
    assertEquals(
        start.connectorThreads(), end.connectorThreads(), jvm + ": the connector's threads");
    assertTrue(
        end.threads() <= start.threads() + THREAD_SLACK,
        jvm + ": threads " + start.threads() + " -> " + end.threads());
    assertTrue(
        end.fds() <= start.fds() + FD_SLACK, jvm + ": fds " + start.fds() + " -> " + end.fds());
    assertTrue(
        end.heapAfterGc() <= start.heapAfterGc() + HEAP_SLACK_BYTES,
        jvm
            + ": heap after GC "
            + start.heapAfterGc()
            + " -> "
            + end.heapAfterGc()
            + " bytes; grew most: "
            + end.topGrowth(start, 10));
  }

  private static void print(String when, Sample start, Sample now) {
    StringBuilder text = new StringBuilder("soak ").append(when).append(":\n");
    text.append("  driver ")
        .append(now.driver.summary())
        .append(", ")
        .append(now.listeners)
        .append(" listeners; Spark holds ")
        .append(now.spark)
        .append('\n');
    for (JvmSample e : now.executors) {
      text.append("  executor ").append(e.summary()).append('\n');
    }
    if (now != start) {
      text.append("  driver grew most:\n");
      now.driver
          .topGrowth(start.driver, 25)
          .forEach(l -> text.append("    ").append(l).append('\n'));
      for (int e = 0; e < now.executors.size() && e < start.executors.size(); e++) {
        text.append("  executor ").append(e).append(" grew most:\n");
        now.executors
            .get(e)
            .topGrowth(start.executors.get(e), 6)
            .forEach(l -> text.append("    ").append(l).append('\n'));
      }
    }
    System.out.print(text);
  }

  /** The driver's and every executor's figures at one moment. */
  private record Sample(
      JvmSample driver, int listeners, Map<String, Long> spark, List<JvmSample> executors) {
    static Sample take(SparkCluster cluster) {
      List<JvmSample> executors = JvmSample.ofExecutors(cluster);
      SparkContext sc = cluster.spark().sparkContext();
      int listeners = sc.listenerBus().listeners().size();
      JvmSample driver = JvmSample.ofThisJvm();
      return new Sample(driver, listeners, sparkRegistries(sc), executors);
    }
  }

  /** What Spark's driver keeps per job, stage, SQL execution and RDD, by kind. */
  private static Map<String, Long> sparkRegistries(SparkContext sc) {
    Map<String, Long> counts = new TreeMap<>();
    counts.put("accumulators", (long) AccumulatorContext.numAccums());
    counts.put("persistent RDDs", (long) sc.getPersistentRDDs().size());
    KVStore store = sc.statusStore().store();
    for (Class<?> kind :
        List.of(
            JobDataWrapper.class,
            StageDataWrapper.class,
            TaskDataWrapper.class,
            RDDStorageInfoWrapper.class,
            RDDOperationGraphWrapper.class,
            ExecutorStageSummaryWrapper.class,
            SQLExecutionUIData.class,
            SparkPlanGraphWrapper.class)) {
      try {
        counts.put(kind.getSimpleName(), store.count(kind));
      } catch (Exception e) {
        counts.put(kind.getSimpleName(), -1L);
      }
    }
    return counts;
  }
}
