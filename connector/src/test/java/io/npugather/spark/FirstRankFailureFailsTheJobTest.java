package io.npugather.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.NpuGatherException;
import io.npugather.ResultCode;
import io.npugather.spark.output.GatheredOutputs;
import io.npugather.spark.rendezvous.RendezvousException;
import io.npugather.spark.testing.GatherLeaks;
import io.npugather.spark.testing.LocalSpark;
import java.util.Map;
import org.apache.spark.SparkException;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * When one rank fails, its peers fail too, reporting it ("rank 1 aborted its communicator"): the
 * job must fail with the first rank's own failure, every time, not with whichever report reaches
 * the driver first.
 */
class FirstRankFailureFailsTheJobTest {
  private static final int RUNS = 20;

  @RegisterExtension
  static final LocalSpark SPARK = LocalSpark.cores(4).shufflePartitions(4).onStart(s -> spark = s);

  private static SparkSession spark;

  @AfterEach
  void nothingLeftInArrowMemory() {
    spark.conf().unset(GatheredOutputs.ONE_PER_EXECUTOR);
    GatherLeaks.awaitArrowReleased();
  }

  /**
   * {@code ranks}: "shared" (the ranks of one executor gather one output together, so a failure
   * reaches the others through their executor), "threads" or "tcp" (each rank its own communicator,
   * over the transport the host backend picks for ranks in one process, or over TCP).
   */
  @ParameterizedTest
  @ValueSource(strings = {"shared", "threads", "tcp"})
  @Timeout(180)
  void theJobFailsWithTheFailingRanksOwnErrorEveryTime(String ranks) {
    spark.conf().set(GatheredOutputs.ONE_PER_EXECUTOR, String.valueOf(ranks.equals("shared")));
    Dataset<Row> df = spark.range(0, 1000, 1, 2).toDF();
    for (int run = 0; run < RUNS; run++) {
      int failing = run % 2;
      AllGatherOptions options =
          AllGatherOptions.defaults()
              .withInjectFailure(String.valueOf(failing))
              .with(
                  Map.of(
                      AllGatherOptions.HOST_TRANSPORT,
                      ranks.equals("tcp") ? "tcp" : "auto",
                      AllGatherOptions.TIMEOUT,
                      "60s"));
      SparkException e =
          assertThrows(
              SparkException.class, () -> NpuGather.allGatherOnNpu(df, options).collectAsList());
      String where = "run " + run + " (" + ranks + "), rank " + failing + " failing: ";
      String rankFailure =
          "allGatherOnNpu rank "
              + failing
              + "/2 (stage "; // then "<id>.0): failure injected by ..."
      assertTrue(
          e.getMessage().contains(rankFailure)
              && e.getMessage().contains("failure injected by " + AllGatherOptions.INJECT_FAILURE),
          where + e.getMessage());
      assertFalse(e.getMessage().contains(ResultCode.REMOTE_ERROR.name()), where + e.getMessage());
      // The job's failure in Spark's error framework, with the rank's own exception as cause.
      RankFailedException failed = assertInstanceOf(RankFailedException.class, e, where);
      assertEquals("NPUGATHER_RANK_FAILED", failed.getCondition(), where);
      assertEquals("58000", failed.getSqlState(), where);
      assertEquals(failing, failed.rank(), where);
      assertEquals("allGatherOnNpu", failed.getMessageParameters().get("operation"), where);
      assertTrue(
          failed.getCause().getMessage().contains("failure injected"), where + failed.getCause());
      for (Throwable t = e.getCause(); t != null; t = t.getCause()) {
        assertFalse(
            t instanceof NpuGatherException || t instanceof RendezvousException,
            where + "a peer's report among the causes: " + t);
        assertTrue(t.getMessage().contains(rankFailure), where + t);
      }
    }
  }

  @Test
  void aPeersReportIsToldFromARanksOwnFailure() {
    assertTrue(
        RankTask.reportsPeersFailure(
            new NpuGatherException(
                ResultCode.REMOTE_ERROR, "allgather", 0, "rank 1 aborted its communicator")));
    assertTrue(
        RankTask.reportsPeersFailure(
            new RendezvousException(RendezvousException.Reason.RANK_LEFT, "rank 1 left")));
    assertFalse(
        RankTask.reportsPeersFailure(
            new NpuGatherException(ResultCode.TIMEOUT, "allgather", 0, "timed out")));
    assertFalse(
        RankTask.reportsPeersFailure(
            new RendezvousException(RendezvousException.Reason.TIMEOUT, "rank 1 missing")));
    assertFalse(RankTask.reportsPeersFailure(new IllegalStateException("failure injected")));
  }
}
