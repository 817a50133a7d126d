package io.npugather.spark

import scala.jdk.CollectionConverters._

import io.npugather.DType
import org.apache.spark.SparkException
import org.apache.spark.internal.Logging
import org.apache.spark.npugather.CallSites
import org.apache.spark.sql.Row
import org.apache.spark.sql.classic.{Dataset => ClassicDataset}

/** The driver side of [[NpuGather.onRanks]]: one barrier stage over the selected columns (one task
  * per partition, rank = partition id), each task running an [[OnRanksTask]]; the ranks' results
  * are collected in rank order. A rank's failure fails it with a [[RankFailedException]] whose
  * cause is the rank's exception.
  */
private[spark] object OnRanksStage extends Logging {

  /** How long a failed job waits for its failed rank's task-end event, which follows the job's end.
    */
  private val FailureEventWaitMs = 2000L

  def collect(
      input: ClassicDataset[Row],
      wireDtype: DType,
      fn: RankFunction[AnyRef],
      options: AllGatherOptions
  ): java.util.List[AnyRef] = {
    val schema = OnRanksTask.checkInput(input.schema)
    OnRanksTask.checkWireDtype(wireDtype)
    val sc = input.sparkSession.sparkContext
    val rows = RunSetup.barrierReady(input.queryExecution.toRdd, schema.length)
    val rankSize = rows.getNumPartitions
    if (rankSize < 1) {
      throw new IllegalArgumentException(
        "onRanks: the input has no partitions; one rank per " +
          "partition needs at least one"
      )
    }
    val run = RunSetup.prepare(
      sc,
      RankTask.Operation.ON_RANKS,
      rankSize,
      options,
      new GatherMetrics(sc, options.backend)
    )
    try {
      val task = new OnRanksTask(schema, wireDtype, fn, run.ranks())
      val what = run.stageName()
      val results = CallSites.withShortForm(sc, what) {
        rows.barrier().mapPartitions(it => task.run(it.asJava).asScala)
      }
      run.unregisterWhenJobEnds(results.id)
      logInfo(
        s"onRanks: $rankSize ranks, columns ${schema.fieldNames.mkString(", ")}, wire " +
          s"$wireDtype, $options"
      )
      val failures = TaskFailures.installOn(sc)
      val collected =
        try {
          CallSites.withShortForm(sc, what) {
            CallSites.withJobDescription(sc, what)(results.collect())
          }
        } catch {
          case job: SparkException =>
            val rankFailure =
              failures.rankFailure(job, RankTask.Operation.ON_RANKS.toString, FailureEventWaitMs)
            throw (if (rankFailure != null) rankFailure else job)
        }
      if (collected.length != rankSize) {
        throw new IllegalStateException(
          s"onRanks: ${collected.length} results from $rankSize " +
            "ranks"
        )
      }
      java.util.Collections.unmodifiableList(java.util.Arrays.asList(collected: _*))
    } finally {
      run.close() // the job is over: nothing waits on the registration any more
    }
  }
}
