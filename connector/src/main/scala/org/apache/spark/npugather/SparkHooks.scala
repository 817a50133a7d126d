package org.apache.spark.npugather

import java.util.Properties

import org.apache.spark.SparkContext
import org.apache.spark.resource.ResourceProfile
import org.apache.spark.scheduler.TaskSet
import org.apache.spark.shuffle.ShuffleWriteProcessor
import org.apache.spark.util.KnownSizeEstimation

/** Spark's hooks that the gathered output plugs into, which Spark keeps inside its own packages:
  * named here so that the connector's Java classes can extend them.
  */
/** Writes a map task's output its own way; Spark's [[ShuffleWriteProcessor]]. */
abstract class MapOutputWriteProcessor extends ShuffleWriteProcessor

/** An object that tells Spark's size estimator its size; Spark's [[KnownSizeEstimation]]. */
trait KnownSize extends KnownSizeEstimation

/** Fails stages as Spark's scheduler does when a task set fails. */
object StageFailures {

  /** Fails every job that waits on stage `stageId` with Spark's "Job aborted due to stage failure:
    * `reason`", whose cause is `cause` (Spark's job cancellation keeps none). A stage that is gone
    * already is left alone.
    */
  def abort(
      sc: SparkContext,
      stageId: Int,
      stageAttempt: Int,
      reason: String,
      cause: Throwable
  ): Unit =
    sc.dagScheduler.taskSetFailed(
      new TaskSet(
        Array.empty,
        stageId,
        stageAttempt,
        0,
        new Properties,
        ResourceProfile.DEFAULT_RESOURCE_PROFILE_ID,
        None
      ),
      reason,
      Some(cause)
    )
}
