package io.npugather.spark

import scala.collection.immutable.ListMap
import scala.jdk.CollectionConverters._

import io.npugather.spark.arrow.read.{GatheredPartitions, GatheredRows}
import io.npugather.spark.arrow.write.PartitionWriter
import io.npugather.spark.output.{GatheredOutput, GatheredOutputs, GatheredRDD}
import org.apache.spark.{Partitioner, ShuffleDependency}
import org.apache.spark.npugather.CallSites
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{
  Alias,
  Attribute,
  AttributeSet,
  Literal,
  UnsafeProjection
}
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, UnaryNode}
import org.apache.spark.sql.catalyst.plans.physical.{Partitioning, UnknownPartitioning}
import org.apache.spark.sql.columnar.CachedBatch
import org.apache.spark.sql.execution.{
  ColumnarToRowExec,
  ProjectExec,
  RowToColumnarTransition,
  SparkPlan,
  SparkStrategy,
  UnaryExecNode,
  WholeStageCodegenExec
}
import org.apache.spark.sql.execution.adaptive.TableCacheQueryStageExec
import org.apache.spark.sql.execution.columnar.{DefaultCachedBatchSerializer, InMemoryTableScanExec}
import org.apache.spark.sql.execution.metric.SQLMetric
import org.apache.spark.sql.vectorized.ColumnarBatch

/** Logical node of allGatherOnNpu: every output partition holds every input row, rank-major.
  * `sourceRank` is a placeholder column of `child` ([[NpuGatherPlanning.node]]) that the gather
  * fills; it comes first in the output.
  *
  * The planner plans `child` itself, placeholder included, and [[NpuAllGatherExec]] drops the
  * placeholder from the physical plan: every physical node under the gather then links to a node of
  * this logical tree, as adaptive execution requires of the plans it replaces with query stages (a
  * node planned from a projection made up at planning time links to no node of the tree, and
  * adaptive execution re-plans its stage without end).
  *
  * `metrics`: the figures of this gather, which every physical plan made from it adds to (the
  * gathered DataFrame's own actions and those of the DataFrames over it); [[GatherMetrics.of]]
  * reads them. Not part of the node's identity, and kept by every copy of it.
  */
case class NpuAllGather(sourceRank: Attribute, options: AllGatherOptions, child: LogicalPlan)(
    val metrics: GatherMetrics
) extends UnaryNode {
  override def output: Seq[Attribute] =
    NpuAllGather.output(sourceRank, NpuAllGather.withoutPlaceholder(sourceRank, child.output))

  override protected def otherCopyArgs: Seq[AnyRef] = metrics :: Nil

  override protected def withNewChildInternal(newChild: LogicalPlan): NpuAllGather =
    copy(child = newChild)(metrics)
}

object NpuAllGather {

  /** The gather's output, in the logical and the physical plan: the source rank, then the rows. The
    * one statement of the gathered schema; the batches the gather reads out follow it
    * ([[GatheredPartitions.batch]]: the source rank, then the rows' columns).
    */
  def output(sourceRank: Attribute, rows: Seq[Attribute]): Seq[Attribute] = sourceRank +: rows

  /** The source-rank column, `int` and never null: an alias of a constant that the gather fills. */
  def sourceRankPlaceholder(name: String): Alias = Alias(Literal(0), name)()

  /** @throws IllegalArgumentException
    *   when the source-rank column `name` is one of `rows`' (compared case-insensitively, as Spark
    *   resolves names by default)
    */
  def requireFreeName(name: String, rows: Seq[Attribute]): Unit =
    rows.find(_.name.equalsIgnoreCase(name)).foreach { column =>
      throw new IllegalArgumentException(
        s"sourceRankColumn '$name' collides with input column '${column.name}'; choose another" +
          " name for the source-rank column"
      )
    }

  /** The figures of the gathers in `plan`, allGatherOnNpu's and the build sides marked for the
    * executors, each once (a self-join holds one gather twice).
    */
  def metricsIn(plan: LogicalPlan): Seq[GatherMetrics] = {
    val found = plan.collectWithSubqueries {
      case g: NpuAllGather      => g.metrics
      case h: AllGatherJoinHint => h.metrics
    }
    found.foldLeft(Seq.empty[GatherMetrics]) { (kept, m) =>
      if (kept.exists(_ eq m)) kept else kept :+ m
    }
  }

  /** `attributes` without the source-rank placeholder. */
  def withoutPlaceholder(sourceRank: Attribute, attributes: Seq[Attribute]): Seq[Attribute] =
    attributes.filterNot(_.exprId == sourceRank.exprId)
}

/** Plans [[NpuAllGather]]; installed into the session by [[NpuGatherPlanning]]. */
object NpuAllGatherStrategy extends SparkStrategy {
  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case g: NpuAllGather =>
      NpuAllGatherExec(g.sourceRank, g.options, planLater(g.child))(g.metrics) :: Nil
    case _ => Nil
  }
}

/** The gather: a barrier stage with one task per input partition (rank = partition id), each
  * gathering every partition, ending at a stage boundary of its own ([[GatheredRDD]]): later stages
  * read the gathered partitions in place, in the executors that hold them. Columnar out (Arrow
  * vectors over the receive buffer, no copy); rows out as well when every column is of a
  * fixed-width type or an array of one (written straight from the buffers by [[GatheredRows]], so
  * Spark adds no ColumnarToRow). The gather runs once per execution of this node's RDD, which is
  * made once: every action on the same plan reads the same gather while it is kept.
  *
  * `spreadOver`: the number of ranks when the gather must run exactly that many (one per task slot,
  * so that every executor holds the gathered table); an input with another number of partitions
  * moves to them through a shuffle ([[RunSetup.shuffleToRanks]]), an input with that many is read
  * where it lies. None: one rank per input partition.
  *
  * `gatherMetrics`: the figures the ranks add to, summed over the ranks of every run; the logical
  * gather's ([[NpuAllGather.metrics]]) when planned from one.
  */
case class NpuAllGatherExec(
    sourceRank: Attribute,
    options: AllGatherOptions,
    child: SparkPlan,
    spreadOver: Option[Int] = None
)(val gatherMetrics: GatherMetrics)
    extends UnaryExecNode {
  override def output: Seq[Attribute] = NpuAllGather.output(sourceRank, child.output)

  override def producedAttributes: AttributeSet = AttributeSet(sourceRank)

  override def outputPartitioning: Partitioning =
    UnknownPartitioning(spreadOver.getOrElse(child.outputPartitioning.numPartitions))

  override def supportsColumnar: Boolean = true

  override def supportsRowBased: Boolean = GatheredRows.supports(child.schema)

  /** The exact column classes, so that Spark's generated code calls them without dispatch. */
  override def vectorTypes: Option[Seq[String]] =
    Some(GatheredPartitions.columnClassNames(child.schema).toSeq)

  /** What Spark's UI shows (of the transports, this backend's), timings with their spread over the
    * ranks.
    */
  override lazy val metrics: Map[String, SQLMetric] = ListMap(
    gatherMetrics.byKey(options.backend).asScala.toSeq: _*
  )

  /** The figures add up over every run of the gather: of this node's RDD, which later actions reuse
    * (reading the kept output, or gathering again once it is released), and of every other plan
    * made from the same logical gather; Spark's UI shows each action's own.
    */
  override def resetMetrics(): Unit = children.foreach(_.resetMetrics())

  @transient private lazy val gathered: RDD[ColumnarBatch] = gather()

  /** The shuffle that spreads the input over `spreadOver` ranks, when the gather needs one. */
  @transient private var spread: Option[ShuffleDependency[_, _, _]] = None

  override protected def doExecuteColumnar(): RDD[ColumnarBatch] = gathered

  /** Where this node's gather keeps its outputs, for code that runs the gather alone and reads the
    * outputs in the executors that hold them (an executor-side build side); None when the input has
    * no partitions (nothing is gathered).
    */
  def gatheredOutputs: Option[GatheredOutputsHandle] = gathered match {
    case g: GatheredRDD =>
      Some(
        GatheredOutputsHandle(
          g.dependencies.head.asInstanceOf[ShuffleDependency[_, _, _]],
          g.barrierRddId,
          g.getNumPartitions,
          g,
          spread
        )
      )
    case _ => None
  }

  override protected def doExecute(): RDD[InternalRow] = {
    val outputSchema = schema
    val inputSchema = child.schema
    val direct = GatheredRows.supports(inputSchema)
    gathered.mapPartitions { batches =>
      if (direct) {
        new GatheredRows(batches.asJava, inputSchema).asScala
      } else {
        val toUnsafe = UnsafeProjection.create(outputSchema)
        batches.flatMap(_.rowIterator().asScala.map(toUnsafe))
      }
    }
  }

  private def gather(): RDD[ColumnarBatch] = {
    val sc = sparkContext
    val source = NpuAllGatherExec.columnarSource(child)
    val offered = NpuAllGatherExec.cachedBatches(source) match {
      case Some((cached, columns)) => CachedInput(cached, columns)
      case None                    =>
        val batches = if (source.supportsColumnar) source.executeColumnar() else null
        if (batches != null && !RunSetup.breaksBarrierStage(batches)) {
          BatchInput(batches)
        } else {
          val rows = NpuAllGatherExec.rowsOf(child).execute()
          RowInput(RunSetup.barrierReady(rows, child.schema.length))
        }
    }
    val input = spreadOver match {
      case Some(ranks)
          if offered.rdd.getNumPartitions > 0 && offered.rdd.getNumPartitions != ranks =>
        val rows = NpuAllGatherExec.rowsOf(child).execute()
        val spreadRows = RunSetup.shuffleToRanks(rows, ranks, child.schema.length)
        spread = NpuAllGatherExec.shuffleUnder(spreadRows)
        RowInput(spreadRows)
      case _ => offered
    }
    val rankSize = input.rdd.getNumPartitions
    if (rankSize == 0) {
      // No partition, no rank: nothing to gather, and no barrier stage to run.
      logInfo(s"allGatherOnNpu: the input has no partitions; the result is empty")
      return sc.emptyRDD[ColumnarBatch]
    }
    val run =
      RunSetup.prepare(sc, RankTask.Operation.ALL_GATHER, rankSize, options, gatherMetrics)
    val onePerExecutor = GatheredOutputs.onePerExecutor(
      conf.getConfString(GatheredOutputs.ONE_PER_EXECUTOR, GatheredOutputs.DEFAULT_ONE_PER_EXECUTOR)
    )
    val task = new GatherTask(child.schema, conf.sessionLocalTimeZone, run.ranks(), onePerExecutor)
    val releaseDelayMs = GatheredOutputs.releaseDelayMs(
      conf.getConfString(GatheredOutputs.RELEASE_DELAY, GatheredOutputs.DEFAULT_RELEASE_DELAY)
    )
    // The barrier stage is named after its RDD's call site.
    val gathered = CallSites.withShortForm(sc, run.stageName()) {
      val ranks: RDD[(Int, GatheredOutput)] = input match {
        case CachedInput(cached, columns) =>
          cached
            .barrier()
            .mapPartitions(it =>
              NpuAllGatherExec.keyedByRank(task.runOnCachedBatches(it.asJava, columns))
            )
        case BatchInput(batches) =>
          batches
            .barrier()
            .mapPartitions(it => NpuAllGatherExec.keyedByRank(task.runOnBatches(it.asJava)))
        case RowInput(rows) =>
          rows
            .barrier()
            .mapPartitions(it => NpuAllGatherExec.keyedByRank(task.runOnRows(it.asJava)))
      }
      new GatheredRDD(ranks, rankSize, options.retryable, releaseDelayMs)
    }
    // Any job may run the barrier stage again while the RDD lives (each stage attempt meets in
    // a round of its own).
    run.unregisterWhenUnreachable(gathered)
    gatherMetrics.recordInput(input.name)
    logInfo(s"allGatherOnNpu: $rankSize ranks, ${input.name} input, $options")
    gathered
  }

  override def simpleString(maxFields: Int): String =
    s"$nodeName $sourceRank, ${options.toString.stripPrefix("AllGatherOptions{").stripSuffix("}")}"

  /** The gather reads its input in the form it is offered (rows, batches, cached bytes), so a
    * transition Spark puts under it would not run: it is left out of the plan, and `explain()`
    * shows what runs. The planned child of [[NpuAllGather]] arrives here with the source-rank
    * placeholder, which is dropped ([[NpuAllGatherExec.withoutPlaceholder]]).
    */
  override protected def otherCopyArgs: Seq[AnyRef] = gatherMetrics :: Nil

  override protected def withNewChildInternal(newChild: SparkPlan): NpuAllGatherExec =
    copy(child =
      NpuAllGatherExec.columnarSource(NpuAllGatherExec.withoutPlaceholder(sourceRank, newChild))
    )(gatherMetrics)
}

/** A gather's outputs: the barrier stage's map side (`dependency`; running it keeps every rank's
  * output in its executor), the barrier RDD whose blocks hold them, and the reader RDD, which keeps
  * them until it is unreachable on the driver unless a job that reads it ends first. `spread`: the
  * shuffle that moves the input to the ranks, when there is one (run alone, it measures the input).
  */
case class GatheredOutputsHandle(
    dependency: ShuffleDependency[_, _, _],
    barrierRddId: Int,
    rankSize: Int,
    readerRdd: RDD[ColumnarBatch],
    spread: Option[ShuffleDependency[_, _, _]]
) {
  def shuffleId: Int = dependency.shuffleId
}

/** The input of a gather, by the form the child offers it in. */
private[spark] sealed trait GatherInput {
  def rdd: RDD[_]
  def name: String
}

/** Spark's cached bytes of an in-memory relation; `columns`: each field's buffer index. */
private[spark] case class CachedInput(rdd: RDD[CachedBatch], columns: Array[Int])
    extends GatherInput {
  override def name: String = "cached batches"
}

private[spark] case class BatchInput(rdd: RDD[ColumnarBatch]) extends GatherInput {
  override def name: String = "columnar batches"
}

private[spark] case class RowInput(rdd: RDD[InternalRow]) extends GatherInput {
  override def name: String = "rows"
}

object NpuAllGatherExec {

  /** A gather of `child` by `ranks` ranks, planned without a logical gather (a join's build side,
    * whose mark holds its `metrics`): its source-rank column is left out of what reads it.
    */
  def spreadOver(
      ranks: Int,
      options: AllGatherOptions,
      child: SparkPlan,
      metrics: GatherMetrics
  ): NpuAllGatherExec =
    NpuAllGatherExec(
      NpuAllGather.sourceRankPlaceholder(options.sourceRankColumn).toAttribute,
      options,
      child,
      Some(ranks)
    )(metrics)

  /** `plan` without the source-rank placeholder: the projection under it when it only appends the
    * placeholder (and so the scan that reads just the gathered columns, or the cached relation),
    * else the same projection without the placeholder. Plans without it are returned as they are.
    */
  def withoutPlaceholder(sourceRank: Attribute, plan: SparkPlan): SparkPlan =
    if (!plan.output.exists(_.exprId == sourceRank.exprId)) {
      plan
    } else {
      plan match {
        case ProjectExec(list, below) =>
          val kept = list.filterNot(_.exprId == sourceRank.exprId)
          below match {
            case _ if kept.map(_.toAttribute) == below.output => below
            // Spark scans the requested columns of a cached relation in the order of their ids:
            // the scan of the gathered columns in their order instead, so that the gather reads
            // the cached bytes ([[cachedBatches]]).
            case s: InMemoryTableScanExec
                if kept.forall(_.isInstanceOf[Attribute]) &&
                  AttributeSet(kept.map(_.toAttribute)) == AttributeSet(s.output) &&
                  kept.size == s.output.size =>
              s.copy(attributes = kept.map(_.toAttribute))
            case _ => ProjectExec(kept, below)
          }
        case other => ProjectExec(NpuAllGather.withoutPlaceholder(sourceRank, other.output), other)
      }
    }

  /** The first shuffle that `rdd`'s stage reads, through its narrow dependencies. */
  private def shuffleUnder(rdd: RDD[_]): Option[ShuffleDependency[_, _, _]] =
    rdd.dependencies.iterator
      .map {
        case shuffle: ShuffleDependency[_, _, _] => Some(shuffle)
        case narrow                              => shuffleUnder(narrow.rdd)
      }
      .collectFirst { case Some(d) => d }

  /** A rank's output as the barrier RDD's one record: (rank, output). */
  private def keyedByRank(output: GatheredOutput): Iterator[(Int, GatheredOutput)] =
    Iterator.single((output.rank, output))

  /** The row plan under `plan` when `plan` only turns its rows into batches: Spark puts a
    * RowToColumnar under every columnar node whose child is row-based, and that detour (rows into
    * Spark's on-heap vectors, then into Arrow) costs more than writing the rows into Arrow.
    */
  def rowSource(plan: SparkPlan): SparkPlan = plan match {
    case r: RowToColumnarTransition => r.child
    case _                          => plan
  }

  /** The row plan of `plan`: [[rowSource]], turned into rows if it offers batches only. */
  def rowsOf(plan: SparkPlan): SparkPlan = rowSource(plan) match {
    case p if p.supportsColumnar && !p.supportsRowBased => ColumnarToRowExec(p)
    case p                                              => p
  }

  /** The columnar plan under `plan` when `plan` only turns it into rows (a ColumnarToRow over a
    * columnar-only child, such as a vectorized Parquet scan, possibly under a RowToColumnar); else
    * `plan` without a RowToColumnar.
    */
  def columnarSource(plan: SparkPlan): SparkPlan = rowSource(plan) match {
    case w: WholeStageCodegenExec =>
      w.child match {
        case c: ColumnarToRowExec => c.child
        case _                    => w
      }
    case c: ColumnarToRowExec => c.child
    case p                    => p
  }

  /** The cached batches of `plan` and each output column's buffer index in them, when `plan` scans
    * a whole in-memory relation stored in Spark's default format with columns that
    * [[PartitionWriter.fromCachedBatches]] reads.
    */
  def cachedBatches(plan: SparkPlan): Option[(RDD[CachedBatch], Array[Int])] = {
    val scan = plan match {
      case s: TableCacheQueryStageExec => s.plan
      case p                           => p
    }
    scan match {
      case s: InMemoryTableScanExec
          if s.predicates.isEmpty &&
            s.relation.cacheBuilder.serializer.isInstanceOf[DefaultCachedBatchSerializer] &&
            PartitionWriter.supportsCachedBatches(s.schema) =>
        val relationIds = s.relation.output.map(_.exprId)
        val columns = s.attributes.map(a => relationIds.indexOf(a.exprId)).toArray
        val cached = s.relation.cacheBuilder.cachedColumnBuffers
        if (columns.contains(-1) || RunSetup.breaksBarrierStage(cached)) None
        else Some((cached, columns))
      case _ => None
    }
  }
}

/** Key r goes to partition r. */
private[spark] class RankPartitioner(ranks: Int) extends Partitioner {
  override def numPartitions: Int = ranks
  override def getPartition(key: Any): Int = key.asInstanceOf[Int]
  override def equals(other: Any): Boolean = other match {
    case p: RankPartitioner => p.numPartitions == numPartitions
    case _                  => false
  }
  override def hashCode(): Int = numPartitions
}
