package io.npugather.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.spark.testing.GatherLeaks;
import io.npugather.spark.testing.LocalSpark;
import java.util.concurrent.TimeUnit;
import org.apache.spark.SparkException;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * A retryable gather that Spark gives up on ({@code spark.stage.maxConsecutiveAttempts}) fails its
 * job with Spark's own exception, which quotes the rank's failure but has no cause: Spark's
 * scheduler aborts the stage in the step that handles the failed task, before any listener hears of
 * it. The driver's record of the ranks' failures gives the job's failure in Spark's error
 * framework, with the rank's exception as its cause, as the Python package raises it.
 */
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class RetryableGatherGivenUpTest {
  @RegisterExtension
  static final LocalSpark SPARK =
      LocalSpark.cores(2).conf("spark.stage.maxConsecutiveAttempts", "1").onStart(s -> spark = s);

  private static SparkSession spark;

  @Test
  void theRecordOfTheRanksFailuresGivesTheRanksExceptionAsTheCause() throws Exception {
    TaskFailures failures = TaskFailures.installOn(spark.sparkContext());
    AllGatherOptions options =
        AllGatherOptions.defaults().withRetryable(true).withInjectFailure("1");
    SparkException job =
        assertThrows(
            SparkException.class,
            () ->
                NpuGather.allGatherOnNpu(spark.range(0, 6, 1, 2).toDF(), options).collectAsList());
    assertTrue(
        job.getMessage().contains("has failed the maximum allowable number of times: 1"),
        job.getMessage());

    RankFailedException failed =
        failures.rankFailure(job, RankFailedException.GATHER, TimeUnit.SECONDS.toMillis(30));

    assertNotNull(failed, "no recorded failure for " + job.getMessage());
    assertEquals(RankFailedException.RANK_FAILED, failed.getCondition());
    assertEquals("58000", failed.getSqlState());
    assertEquals(1, failed.rank());
    assertEquals(IllegalStateException.class, failed.getCause().getClass());
    assertTrue(
        failed.getCause().getMessage().contains("failure injected by"),
        failed.getCause().toString());
    assertEquals(job, failed.getSuppressed()[0]);
    GatherLeaks.awaitArrowReleased();
  }
}
