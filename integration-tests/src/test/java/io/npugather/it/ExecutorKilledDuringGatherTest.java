package io.npugather.it;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.npugather.spark.AllGatherOptions;
import io.npugather.spark.NpuGather;
import io.npugather.spark.testing.Causes;
import io.npugather.spark.testing.RankMajor;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * An executor JVM killed (SIGKILL) while its rank waits in the gather: rank 1 is held before the
 * gather (a filter that blocks on its first row), so rank 0 has converted its partition and waits
 * for rank 1 in the rendezvous; then rank 0's executor is killed.
 */
class ExecutorKilledDuringGatherTest {
  private static final Duration GATHER_TIMEOUT = Duration.ofSeconds(10);
  private static final int ROWS = 20_000;

  /** Closed after the class's last test, whatever happened. */
  @AutoClose private static SparkCluster cluster;

  private static SparkSession spark;
  private Path markers;

  @BeforeAll
  static void startCluster() {
    cluster = SparkCluster.start("ExecutorKilledDuringGatherTest", 2, Map.of());
    spark = cluster.spark();
  }

  @BeforeEach
  void twoExecutorsAndAMarkerDirectory() throws IOException {
    // A previous test's killed executor is replaced by the Master: wait for the replacement.
    cluster.awaitExecutors(Duration.ofSeconds(180));
    markers = Files.createTempDirectory("npugather-it-markers-");
  }

  @AfterEach
  void releaseAndCheckNothingIsLeftBehind() throws IOException {
    // Whatever happened, let a still-blocked rank 1 go.
    Files.writeString(markers.resolve("released"), "");
    try {
      // The surviving executor released its rank; the replacement holds nothing either.
      cluster.awaitExecutors(Duration.ofSeconds(180));
      cluster.explainFailure(() -> GatherChecks.assertNothingLeftBehind(cluster));
    } finally {
      try (Stream<Path> walk = Files.walk(markers)) {
        walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
  }

  @Test
  void retryableGatherCompletesWithCorrectOutputAfterSparkReplacesTheKilledExecutor() {
    cluster.explainFailure(
        () -> {
          Dataset<Row> input = input();
          List<List<Row>> expected = RankMajor.partitions(input);
          AllGatherOptions options =
              AllGatherOptions.defaults().withRetryable(true).withTimeout(GATHER_TIMEOUT);
          Dataset<Row> gathered = NpuGather.allGatherOnNpu(blockRankOne(input), options);

          CompletableFuture<List<List<Row>>> job =
              CompletableFuture.supplyAsync(() -> RankMajor.partitions(gathered));
          long killed = killRankZerosExecutorWhileItWaits(job);

          List<List<Row>> out = job.get(240, TimeUnit.SECONDS);
          RankMajor.assertOnEveryPartition(expected, out);
          assertFalse(ProcessHandle.of(killed).map(ProcessHandle::isAlive).orElse(false));
          // The gather ran again, in a new stage attempt, on the replacement executor.
          assertTrue(
              Files.exists(markers.resolve("p0-s1")) && Files.exists(markers.resolve("p1-s1")),
              "no second stage attempt: " + listMarkers());
          long rerunPid = Long.parseLong(Files.readString(markers.resolve("p0-s1")).trim());
          assertNotEquals(killed, rerunPid);
        });
  }

  @Test
  void gatherFailsWithinTheTimeoutWithAClearErrorWhenAnExecutorIsKilledAndNotRetryable() {
    cluster.explainFailure(
        () -> {
          AllGatherOptions options = AllGatherOptions.defaults().withTimeout(GATHER_TIMEOUT);
          Dataset<Row> gathered = NpuGather.allGatherOnNpu(blockRankOne(input()), options);

          CompletableFuture<List<List<Row>>> job =
              CompletableFuture.supplyAsync(() -> RankMajor.partitions(gathered));
          killRankZerosExecutorWhileItWaits(job);
          long killedAt = System.nanoTime();

          try {
            List<List<Row>> out = job.get(GATHER_TIMEOUT.toSeconds() + 60, TimeUnit.SECONDS);
            fail(
                "the gather succeeded although rank 0's executor was killed: "
                    + out.size()
                    + " partitions");
          } catch (ExecutionException e) {
            long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - killedAt);
            String messages = Causes.messages(e);
            // Allowance over the timeout for a busy machine; the failure is normally immediate.
            assertTrue(
                seconds <= GATHER_TIMEOUT.toSeconds() + 15,
                "failed only after " + seconds + " s: " + messages);
            // The connector names the option, Spark the failed barrier stage and the lost executor.
            assertTrue(
                messages.contains("barrier") && messages.contains("npugather.retryable"), messages);
            assertTrue(messages.contains("xecutor") && messages.contains("exited"), messages);
          }
        });
  }

  /** 20000 rows in 2 partitions: ids, strings with nulls, arrays. */
  private static Dataset<Row> input() {
    return spark
        .range(0, ROWS, 1, 2)
        .selectExpr(
            "id",
            "CASE WHEN id % 7 = 0 THEN NULL ELSE concat('row-', id) END AS name",
            "array(id, id * 3, CASE WHEN id % 5 = 0 THEN NULL ELSE id END) AS nums");
  }

  /**
   * The input, through a filter that keeps every row but records, per partition and stage attempt,
   * the executor's pid in a marker file, and holds partition 1 in stage attempt 0 on its first row
   * until the test releases it or Spark kills the task.
   */
  private Dataset<Row> blockRankOne(Dataset<Row> input) {
    return input.where(markAndBlock(markers.toString()).apply(functions.col("id")));
  }

  private static UserDefinedFunction markAndBlock(String markerDir) {
    return functions.udf(
        (UDF1<Long, Boolean>)
            id -> {
              TaskContext task = TaskContext.get();
              Path marker =
                  Path.of(markerDir, "p" + task.partitionId() + "-s" + task.stageAttemptNumber());
              if (!Files.exists(marker)) {
                Path tmp = Files.createTempFile(Path.of(markerDir), "marker", ".tmp");
                Files.writeString(tmp, Long.toString(ProcessHandle.current().pid()));
                Files.move(tmp, marker, StandardCopyOption.ATOMIC_MOVE);
              }
              if (task.partitionId() == 1 && task.stageAttemptNumber() == 0) {
                Path released = Path.of(markerDir, "released");
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
                while (!Files.exists(released) && System.nanoTime() < deadline) {
                  task.killTaskIfInterrupted();
                  Thread.sleep(50);
                }
              }
              return true;
            },
        DataTypes.BooleanType);
  }

  /**
   * Waits until both ranks run (rank 1 held), gives rank 0 time to reach the rendezvous, and kills
   * rank 0's executor. Returns the killed pid.
   */
  private long killRankZerosExecutorWhileItWaits(CompletableFuture<?> job) throws Exception {
    Path rank0 = markers.resolve("p0-s0");
    Path rank1 = markers.resolve("p1-s0");
    boolean started =
        SparkCluster.waitUntil(
            Duration.ofSeconds(120),
            () -> job.isDone() || (Files.exists(rank0) && Files.exists(rank1)));
    if (job.isDone()) {
      job.get(); // throws the job's error
      fail("the job ended before rank 0's executor was killed");
    }
    assertTrue(started, "the ranks did not start within 120 s: " + listMarkers());
    long pid0 = Long.parseLong(Files.readString(rank0, StandardCharsets.UTF_8).trim());
    long pid1 = Long.parseLong(Files.readString(rank1, StandardCharsets.UTF_8).trim());
    assertNotEquals(pid0, pid1, "both ranks in one executor JVM");
    // Rank 0 converts 10000 rows and then waits for rank 1 in the rendezvous.
    Thread.sleep(2000);
    assertFalse(job.isDone(), "the job ended while rank 1 was held");
    cluster.killExecutor(pid0);
    return pid0;
  }

  private String listMarkers() {
    try (Stream<Path> files = Files.list(markers)) {
      return files.map(p -> p.getFileName().toString()).sorted().toList().toString();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
