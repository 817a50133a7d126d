package io.npugather.spark

import java.util.Objects

import scala.jdk.CollectionConverters._

import io.npugather.DType
import io.npugather.spark.memory.GatherMemory
import org.apache.spark.SparkException
import org.apache.spark.internal.Logging
import org.apache.spark.npugather.CallSites
import org.apache.spark.sql.{Dataset, Row}
import org.apache.spark.sql.classic.{Dataset => ClassicDataset}
import org.apache.spark.sql.types.StructType

/** The driver side of [[NpuGather.onRanks]]: the call's checks, once, then one barrier stage over
  * the selected columns (one task per partition, rank = partition id), each task running an
  * [[OnRanksTask]]; the ranks' results are collected in rank order. A rank's failure fails it with
  * a [[RankFailedException]] whose cause is the rank's exception.
  */
private[spark] object OnRanksStage extends Logging {

  /** How long a failed job waits for its failed rank's task-end event, which follows the job's end.
    */
  private val FailureEventWaitMs = 2000L

  /** What [[NpuGather.onRanks]] describes: `fn`'s results by rank, over `columns` of `df`. */
  def collect(
      df: Dataset[Row],
      columns: java.util.List[String],
      options: AllGatherOptions,
      wireDtype: DType,
      fn: RankFunction[AnyRef]
  ): java.util.List[AnyRef] = {
    OnRanksTask.checkWireDtype(wireDtype)
    val classic = GatherPlans.classic(df, "onRanks")
    GatherMemory.checkConf(classic.sparkSession.sparkContext.getConf)
    val selected = classic.select(columns.asScala.toSeq.zipWithIndex.map { case (column, i) =>
      classic.col(Objects.requireNonNull(column, s"columns[$i]"))
    }: _*)
    val schema = OnRanksTask.checkInput(selected.schema)
    GatherPlans.requireRootAmongRanks(options, selected)
    val input =
      if (options.rankSize > 0 && options.rankSize != selected.rdd.getNumPartitions) {
        selected.repartition(options.rankSize)
      } else {
        selected
      }
    runStage(input, schema, wireDtype, fn, options)
  }

  private def runStage(
      input: ClassicDataset[Row],
      schema: StructType,
      wireDtype: DType,
      fn: RankFunction[AnyRef],
      options: AllGatherOptions
  ): java.util.List[AnyRef] = {
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
      new GatherMetrics(sc) // what the ranks count; onRanks gives back the results alone
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
