package io.npugather.spark.output

import scala.jdk.CollectionConverters._

import io.npugather.spark.RankPartitioner
import org.apache.spark.{Dependency, Partition, ShuffleDependency, TaskContext}
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.vectorized.ColumnarBatch

/** Reader partition `index`: the gathered rows, as they stand on any rank. */
private[spark] case class GatheredPartition(index: Int) extends Partition

/** The gathered partitions after the stage boundary that ends every gather: partition r holds every
  * input row, rank-major, as one batch per source rank. Its one dependency is a shuffle dependency
  * on the barrier RDD, so the barrier stage is a map stage of its own whose
  * [[GatheredOutputWriter]] keeps each rank's output in its executor, and Spark runs any later
  * narrow dependency, limit or coalesce in stages of their own; its tasks read the outputs in place
  * ([[GatheredOutputReader]]), preferring the executors that hold one.
  */
private[spark] class GatheredRDD(
    @transient private val ranks: RDD[(Int, GatheredOutput)],
    rankSize: Int,
    retryable: Boolean,
    releaseDelayMs: Long
) extends RDD[ColumnarBatch](ranks.context, Nil) {

  @transient private val dependency = new ShuffleDependency[Int, GatheredOutput, GatheredOutput](
    ranks,
    new RankPartitioner(rankSize),
    shuffleWriterProcessor = new GatheredOutputWriter(ranks.id)
  )

  /** The gather's map outputs. */
  val shuffleId: Int = dependency.shuffleId

  /** Id of the barrier RDD, under which the executors keep the outputs. */
  val barrierRddId: Int = ranks.id

  GatheredOutputs
    .of(ranks.context)
    .track(this, id, shuffleId, barrierRddId, retryable, releaseDelayMs)

  override protected def getDependencies: Seq[Dependency[_]] = Seq(dependency)

  override protected def getPartitions: Array[Partition] =
    Array.tabulate[Partition](rankSize)(GatheredPartition)

  override protected def getPreferredLocations(split: Partition): Seq[String] =
    GatheredOutputs.preferredLocations(shuffleId, split.index, rankSize).toSeq

  override def compute(split: Partition, context: TaskContext): Iterator[ColumnarBatch] =
    GatheredOutputReader
      .open(barrierRddId, shuffleId, rankSize, split.index, context)
      .batches()
      .asScala
}
