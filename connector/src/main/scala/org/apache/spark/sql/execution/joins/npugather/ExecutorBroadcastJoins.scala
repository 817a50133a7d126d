package org.apache.spark.sql.execution.joins.npugather

import java.util.Locale
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.locks.ReentrantLock

import scala.concurrent.duration.Duration
import scala.jdk.CollectionConverters._
import scala.reflect.ClassTag

import io.npugather.spark.{
  AllGatherJoinHint,
  AllGatherOptions,
  ExecutorBroadcastConf,
  GatheredOutputsHandle,
  NpuAllGatherExec
}
import io.npugather.spark.output.{GatheredOutput, GatheredOutputReader}
import org.apache.spark.{SparkEnv, TaskContext}
import org.apache.spark.broadcast.Broadcast
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, BindReferences, SortOrder}
import org.apache.spark.sql.catalyst.expressions.{Expression, Literal, UnaryExpression}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, CodegenFallback}
import org.apache.spark.sql.catalyst.optimizer.{
  BuildLeft,
  BuildRight,
  BuildSide,
  JoinSelectionHelper
}
import org.apache.spark.sql.catalyst.planning.ExtractEquiJoinKeys
import org.apache.spark.sql.catalyst.plans.{InnerLike, JoinType, LeftOuter, RightOuter}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, Join, JoinHint, LogicalPlan, Project}
import org.apache.spark.sql.catalyst.plans.physical.{
  BroadcastMode,
  BroadcastPartitioning,
  IdentityBroadcastMode,
  Partitioning
}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.execution.{
  CodegenSupport,
  FilterExec,
  InputAdapter,
  ProjectExec,
  SparkPlan,
  SparkStrategy,
  UnaryExecNode,
  WholeStageCodegenExec
}
import org.apache.spark.sql.execution.adaptive.{AQEShuffleReadExec, ShuffleQueryStageExec}
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec
import org.apache.spark.sql.execution.joins.{
  BroadcastNestedLoopJoinExec,
  HashedRelation,
  HashedRelationBroadcastMode,
  HashedRelationInfo,
  HashJoin
}
import org.apache.spark.sql.execution.metric.{SQLMetric, SQLMetrics}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.vectorized.ColumnarBatch
import org.apache.spark.sql.types.DataType
import org.apache.spark.storage.RDDBlockId
import org.apache.spark.util.ThreadUtils

/** Plans joins whose build side carries the `ALLGATHER` hint ([[AllGatherJoinHint]]): the build
  * side is all-gathered onto every executor ([[ExecutorBuildExec]]), built there once per executor
  * and joined with the stream side where it lies — Spark's hash join
  * ([[ExecutorBroadcastHashJoinExec]]) for equi-joins, Spark's nested-loop join over the gathered
  * rows otherwise. A mark the planner does not use (a full outer join, a build side Spark does not
  * build for that join type; an automatic mark whose side Spark broadcasts after all, or that is
  * above `spark.npugather.join.maxBuildBytes`) leaves the join to Spark's own strategies, and the
  * plan shows why ([[AllGatherNotUsedExec]]).
  */
object AllGatherJoinStrategy extends SparkStrategy with JoinSelectionHelper {
  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case ExtractEquiJoinKeys(joinType, leftKeys, rightKeys, otherCondition, _, left, right, _)
        if buildSide(joinType, left, right).isDefined =>
      val side = buildSide(joinType, left, right).get
      val (buildKeys, marker) = side match {
        case BuildRight => (rightKeys, right.asInstanceOf[AllGatherJoinHint])
        case BuildLeft  => (leftKeys, left.asInstanceOf[AllGatherJoinHint])
      }
      val boundKeys =
        BindReferences.bindReferences(HashJoin.rewriteKeyExpr(buildKeys), marker.output)
      val build =
        ExecutorBuildExec(
          HashedRelationBroadcastMode(boundKeys),
          marker.output,
          gather(marker),
          marker.automatic,
          marker.child.stats.sizeInBytes
        )
      val (l, r) = sides(side, build, left, right)
      val (normalizedLeft, normalizedRight) = HashJoin.normalizeJoinKeys(leftKeys, rightKeys)
      ExecutorBroadcastHashJoinExec(
        normalizedLeft,
        normalizedRight,
        joinType,
        side,
        otherCondition,
        l,
        r
      ) :: Nil

    case Join(left, right, joinType, condition, _) if buildSide(joinType, left, right).isDefined =>
      val side = buildSide(joinType, left, right).get
      val marker = (if (side == BuildRight) right else left).asInstanceOf[AllGatherJoinHint]
      val build = ExecutorBuildExec(
        IdentityBroadcastMode,
        marker.output,
        gather(marker),
        marker.automatic,
        marker.child.stats.sizeInBytes
      )
      val (l, r) = sides(side, build, left, right)
      val onExecutors = ExecutorSideCondition(condition.getOrElse(Literal.TrueLiteral))
      BroadcastNestedLoopJoinExec(l, r, side, joinType, Some(onExecutors)) :: Nil

    case j: Join =>
      // Marks this join does not use: each says why when it is planned alone (below).
      for (child <- Seq(j.left, j.right)) {
        child match {
          case m: AllGatherJoinHint if m.getTagValue(AllGatherJoinHint.NotUsedReason).isEmpty =>
            m.setTagValue(
              AllGatherJoinHint.NotUsedReason,
              declined(m).getOrElse(
                s"a ${j.joinType.sql.toLowerCase(Locale.ROOT)} join cannot build this side"
              )
            )
          case _ =>
        }
      }
      Nil

    case m: AllGatherJoinHint =>
      val reason = m
        .getTagValue(AllGatherJoinHint.NotUsedReason)
        .getOrElse("no join above it builds this side")
      AllGatherNotUsedExec(reason, planLater(m.child)) :: Nil

    case _ => Nil
  }

  private def buildSide(joinType: JoinType, left: LogicalPlan, right: LogicalPlan) =
    if (used(right) && canBuildBroadcastRight(joinType)) Some(BuildRight)
    else if (used(left) && canBuildBroadcastLeft(joinType)) Some(BuildLeft)
    else None

  private def used(side: LogicalPlan): Boolean = side match {
    case m: AllGatherJoinHint => declined(m).isEmpty
    case _                    => false
  }

  /** Why an automatic mark is not used, judged by the sizes known now (with adaptive execution, the
    * runtime size once the side has run): Spark broadcasts the side, or it is above the limit.
    */
  private def declined(marker: AllGatherJoinHint): Option[String] =
    if (!marker.automatic) None
    else {
      val conf = SQLConf.get
      val size = marker.child.stats.sizeInBytes
      val limit = ExecutorBroadcastConf.maxBuildBytes(
        conf.getConfString(
          ExecutorBroadcastConf.MAX_BUILD_BYTES,
          ExecutorBroadcastConf.DEFAULT_MAX_BUILD_BYTES
        )
      )
      if (canBroadcastBySize(marker.child, conf)) {
        Some(s"automatic: $size bytes, within Spark's broadcast threshold")
      } else if (size > limit) {
        Some(s"automatic: $size bytes, above ${ExecutorBroadcastConf.MAX_BUILD_BYTES}")
      } else {
        None
      }
    }

  private def sides(
      side: BuildSide,
      build: SparkPlan,
      left: LogicalPlan,
      right: LogicalPlan
  ): (SparkPlan, SparkPlan) = side match {
    case BuildRight => (planLater(left), build)
    case BuildLeft  => (build, planLater(right))
  }

  /** The gather of the hinted side's rows ([[BuildRows]]), with the session's options, by one rank
    * per task slot.
    */
  private def gather(marker: AllGatherJoinHint): NpuAllGatherExec = {
    val session = SparkSession.active
    val options = AllGatherOptions.fromConf(session.conf.getAll.asJava)
    val slots = math.max(1, session.sparkContext.defaultParallelism)
    val rows = BuildRows.asBytes(planLater(marker.child))
    NpuAllGatherExec.spreadOver(slots, options, rows, marker.metrics)
  }
}

/** Marks equi-joins for [[AllGatherJoinStrategy]] by size when `spark.npugather.join.auto` is true:
  * a join without hints whose build side (one Spark may build for its join type; the smaller when
  * both are) Spark would not broadcast, estimated at no more than
  * `spark.npugather.join.maxBuildBytes`. The strategy checks the size again when it plans the join,
  * with the runtime size under adaptive execution.
  */
object ChooseAllGatherJoins extends Rule[LogicalPlan] with JoinSelectionHelper {
  override def apply(plan: LogicalPlan): LogicalPlan =
    if (
      // The settings are read for plans with a join only: a bad value fails no other query.
      !plan.exists(_.isInstanceOf[Join]) || !ExecutorBroadcastConf.auto(
        conf.getConfString(ExecutorBroadcastConf.AUTO, ExecutorBroadcastConf.DEFAULT_AUTO)
      )
    ) {
      plan
    } else {
      val limit = ExecutorBroadcastConf.maxBuildBytes(
        conf.getConfString(
          ExecutorBroadcastConf.MAX_BUILD_BYTES,
          ExecutorBroadcastConf.DEFAULT_MAX_BUILD_BYTES
        )
      )
      def fits(side: LogicalPlan): Boolean =
        !side.isInstanceOf[AllGatherJoinHint] && !canBroadcastBySize(side, conf) &&
          side.stats.sizeInBytes <= limit
      plan.transformUp {
        case j @ Join(left, right, joinType, _, JoinHint.NONE)
            if ExtractEquiJoinKeys.unapply(j).isDefined &&
              !left.isInstanceOf[AllGatherJoinHint] && !right.isInstanceOf[AllGatherJoinHint] =>
          val buildsRight = canBuildBroadcastRight(joinType) && fits(right)
          val buildsLeft = canBuildBroadcastLeft(joinType) && fits(left)
          val sc = SparkSession.active.sparkContext
          if (buildsRight && (!buildsLeft || right.stats.sizeInBytes <= left.stats.sizeInBytes)) {
            j.copy(right = AllGatherJoinHint.over(right, sc, automatic = true))
          } else if (buildsLeft) {
            j.copy(left = AllGatherJoinHint.over(left, sc, automatic = true))
          } else {
            j
          }
      }
    }
}

/** The plan of a build side whose `ALLGATHER` mark was not used, as Spark plans it: the node only
  * shows in `explain()` why (`reason`).
  */
case class AllGatherNotUsedExec(reason: String, child: SparkPlan) extends UnaryExecNode {
  override def output: Seq[Attribute] = child.output

  override def outputPartitioning: Partitioning = child.outputPartitioning

  override def outputOrdering: Seq[SortOrder] = child.outputOrdering

  override def supportsColumnar: Boolean = child.supportsColumnar

  override def supportsRowBased: Boolean = child.supportsRowBased

  override protected def doExecute(): RDD[InternalRow] = child.execute()

  override protected def doExecuteColumnar(): RDD[ColumnarBatch] = child.executeColumnar()

  override def simpleString(maxFields: Int): String = s"$nodeName ($reason)"

  override protected def withNewChildInternal(newChild: SparkPlan): AllGatherNotUsedExec =
    copy(child = newChild)
}

/** A nested-loop join's condition when its build side is an [[ExecutorBuildExec]]: the same
  * predicate, which keeps the join out of whole-stage code generation (Spark's generated join code
  * reads the build rows on the driver to plan itself; its row-by-row path reads them in the tasks).
  */
case class ExecutorSideCondition(child: Expression) extends UnaryExpression with CodegenFallback {
  override def dataType: DataType = child.dataType

  override def eval(input: InternalRow): Any = child.eval(input)

  override def prettyName: String = "built_on_executors"

  override protected def withNewChildInternal(newChild: Expression): ExecutorSideCondition =
    copy(child = newChild)
}

/** Keeps the `ALLGATHER` mark right under its join: a projection or a deterministic filter the
  * optimizer puts between them (column pruning, predicates pushed into the build side) moves under
  * the mark.
  */
object PullUpAllGatherJoinHint extends Rule[LogicalPlan] {
  override def apply(plan: LogicalPlan): LogicalPlan = plan.transformUp {
    case Project(list, h: AllGatherJoinHint) => h.copy(child = Project(list, h.child))(h.metrics)
    case Filter(condition, h: AllGatherJoinHint) if condition.deterministic =>
      h.copy(child = Filter(condition, h.child))(h.metrics)
  }
}

/** The build side of an executor-side broadcast, whose rows are `output`: `child` (an
  * [[NpuAllGatherExec]]) gathers them onto every executor ([[BuildRows]]); [[doExecuteBroadcast]]
  * runs that gather alone and returns an [[ExecutorRelation]], whose value each executor builds
  * once, from its own gathered output, when a task first asks for it. Nothing passes through the
  * driver. A hinted build side (not `automatic`) above `spark.npugather.join.maxBuildBytes` fails
  * before the gather starts.
  */
case class ExecutorBuildExec(
    mode: BroadcastMode,
    output: Seq[Attribute],
    child: SparkPlan,
    automatic: Boolean,
    estimatedBytes: BigInt
) extends UnaryExecNode {

  private def gatherNode: NpuAllGatherExec = child.collectFirst { case g: NpuAllGatherExec =>
    g
  }.get

  override def outputPartitioning: Partitioning = BroadcastPartitioning(mode)

  override lazy val metrics: Map[String, SQLMetric] = Map(
    "buildTime" -> SQLMetrics.createTimingMetric(sparkContext, "time to build (all executors)"),
    "executorsBuilt" -> SQLMetrics.createMetric(sparkContext, "executors that built"),
    "rowsBuilt" -> SQLMetrics.createMetric(sparkContext, "rows built (all executors)"),
    "rowsCopied" -> SQLMetrics.createMetric(
      sparkContext,
      "rows copied into relations (all executors)"
    )
  )

  @transient private lazy val relation: ExecutorRelation[AnyRef] = {
    val handle = gatherNode.gatheredOutputs
    if (!automatic) {
      requireWithinLimit(handle)
    }
    handle.foreach { h =>
      // The barrier stage alone: every rank's output stays in its executor.
      sparkContext.submitMapStage(h.dependency).get()
    }
    new ExecutorRelation[AnyRef](
      ExecutorRelation.nextId(),
      handle,
      mode,
      output,
      metrics("buildTime"),
      metrics("executorsBuilt"),
      metrics("rowsBuilt"),
      metrics("rowsCopied")
    )
  }

  /** Spark's size of the rows the gather reads, against the limit: the bytes of the shuffle that
    * spreads them over the ranks (run now, alone), or of the shuffle the gather reads them from;
    * otherwise, when the ranks compute them, Spark's estimate of the build side (`estimatedBytes`).
    */
  private def requireWithinLimit(handle: Option[GatheredOutputsHandle]): Unit = {
    val limit = conf.getConfString(
      ExecutorBroadcastConf.MAX_BUILD_BYTES,
      ExecutorBroadcastConf.DEFAULT_MAX_BUILD_BYTES
    )
    val limitBytes = ExecutorBroadcastConf.maxBuildBytes(limit)
    val size: BigInt = handle.flatMap(_.spread) match {
      case Some(spread) =>
        // null when the input has no partitions
        val stats = sparkContext.submitMapStage(spread).get()
        BigInt(Option(stats).map(_.bytesByPartitionId.sum).getOrElse(0L))
      case None => ExecutorBuildExec.shuffledBytes(gatherNode.child).getOrElse(estimatedBytes)
    }
    if (size > limitBytes) {
      throw ExecutorBroadcastConf.buildSideTooLarge(size.toLong, limitBytes, limit)
    }
  }

  override protected def doExecute(): RDD[InternalRow] =
    throw new UnsupportedOperationException(
      s"$nodeName is the build side of a join and is read through executeBroadcast"
    )

  override protected[sql] def doExecuteBroadcast[T](): Broadcast[T] =
    relation.asInstanceOf[Broadcast[T]]

  override def simpleString(maxFields: Int): String =
    s"$nodeName $mode${if (automatic) ", automatic" else ""}"

  override protected def withNewChildInternal(newChild: SparkPlan): ExecutorBuildExec =
    copy(child = newChild)
}

object ExecutorBuildExec {

  /** The bytes of the shuffle output that `plan` reads as it is (under projections, filters and
    * code generation), once that shuffle has run: run now when adaptive execution has not run it.
    */
  private def shuffledBytes(plan: SparkPlan): Option[BigInt] = plan match {
    case stage: ShuffleQueryStageExec  => Some(stage.getRuntimeStatistics.sizeInBytes)
    case exchange: ShuffleExchangeExec =>
      // null when the input has no partitions
      val stats = ThreadUtils.awaitResult(exchange.mapOutputStatisticsFuture, Duration.Inf)
      Some(BigInt(Option(stats).map(_.bytesByPartitionId.sum).getOrElse(0L)))
    case read: AQEShuffleReadExec       => shuffledBytes(read.child)
    case project: ProjectExec           => shuffledBytes(project.child)
    case filter: FilterExec             => shuffledBytes(filter.child)
    case codegen: WholeStageCodegenExec => shuffledBytes(codegen.child)
    case input: InputAdapter            => shuffledBytes(input.child)
    case _                              => None
  }
}

/** The value of an executor-side broadcast: on the driver only the gather's whereabouts (and a
  * reference that keeps its outputs); in an executor, the relation that `mode` makes of the
  * executor's gathered rows, built by the first task that asks and shared by the others. For a hash
  * join that is an index over the gathered rows where they lie ([[GatheredRelation]]); for a
  * nested-loop join, the gathered rows where they lie.
  */
class ExecutorRelation[T: ClassTag](
    id: Long,
    @transient private val handle: Option[GatheredOutputsHandle],
    mode: BroadcastMode,
    buildOutput: Seq[Attribute],
    buildTime: SQLMetric,
    executorsBuilt: SQLMetric,
    rowsBuilt: SQLMetric,
    rowsCopied: SQLMetric
) extends Broadcast[T](id) {
  private val barrierRddId = handle.map(_.barrierRddId).getOrElse(-1)
  private val shuffleId = handle.map(_.shuffleId).getOrElse(-1)
  private val rankSize = handle.map(_.rankSize).getOrElse(0)

  /** This executor's relation, read through the gathered output this task holds (read-locked until
    * the task ends, so never released under it).
    */
  override protected def getValue(): T = {
    val context = TaskContext.get()
    if (context == null) {
      throw new IllegalStateException(
        "the value of an ALLGATHER build side is built in an executor's task, not on the driver"
      )
    }
    val output = if (rankSize == 0) null else openOutput(context)
    val source = if (output == null) null else output.shared()
    ExecutorRelation.getOrBuild(
      (barrierRddId, shuffleId, mode.canonicalized),
      source,
      build(output)
    ) match {
      case gathered: OverGatheredRows => gathered.over(output).asInstanceOf[T]
      case relation                   => relation.asInstanceOf[T]
    }
  }

  private def openOutput(context: TaskContext): GatheredOutput = {
    val output = GatheredOutputReader.openAnyLocal(barrierRddId, rankSize, context)
    if (output == null) {
      throw new IllegalStateException(
        s"executor ${SparkEnv.get.executorId} holds no rank of the ALLGATHER build side " +
          s"($rankSize ranks): every executor must run one, which needs one free task " +
          "slot per rank on every executor while the gather runs"
      )
    }
    output
  }

  /** The relation `mode` makes of `output`'s rows (none: the build side has no partitions). */
  private def build(output: GatheredOutput): AnyRef = {
    val start = System.nanoTime()
    val gatheredRows = if (output == null) 0L else output.totalRows()
    val relation = mode match {
      case hashed: HashedRelationBroadcastMode
          if gatheredRows > 0 && GatheredRelation.handles(hashed) =>
        GatheredRelation.build(output, hashed, buildOutput)
      case _ =>
        val rows: Iterator[InternalRow] =
          if (output == null) Iterator.empty
          else {
            // A nested-loop join keeps the rows; Spark's hashed relations copy them.
            BuildRows.rowsOf(output, buildOutput.size, fresh = mode == IdentityBroadcastMode)
          }
        // Sized for every row at once, as Spark's broadcast exchange sizes its relation.
        mode.transform(rows, Some(gatheredRows)).asInstanceOf[AnyRef]
    }
    buildTime.add((System.nanoTime() - start) / 1000000L)
    executorsBuilt.add(1)
    rowsBuilt.add(gatheredRows)
    if (!relation.isInstanceOf[OverGatheredRows] && mode != IdentityBroadcastMode) {
      rowsCopied.add(gatheredRows)
    }
    relation
  }

  override protected def doUnpersist(blocking: Boolean): Unit = ()

  override protected def doDestroy(blocking: Boolean): Unit = ()

  override def toString: String = s"ExecutorRelation($id, gather of rdd $barrierRddId)"
}

object ExecutorRelation {
  private val ids = new java.util.concurrent.atomic.AtomicLong(Long.MinValue / 2)

  /** Ids of their own, far from Spark's broadcasts'. */
  def nextId(): Long = ids.incrementAndGet()

  private final class Slot {
    val building = new ReentrantLock()
    @volatile var value: AnyRef = _
    @volatile var source: AnyRef = _ // the executor output it was built of
  }

  /** This executor's relations, by the gather they are built of; dropped once its output is. */
  private val slots = new ConcurrentHashMap[(Int, Int, BroadcastMode), Slot]()

  /** The relation of `key` built of `source`: built now when there is none, or when the one there
    * was built of another output (the gather ran again since). A task that waits while another
    * builds it can be interrupted (a killed task): it then throws InterruptedException.
    */
  private[npugather] def getOrBuild(
      key: (Int, Int, BroadcastMode),
      source: AnyRef,
      build: => AnyRef
  ): AnyRef = {
    forgetReleased()
    val slot = slots.computeIfAbsent(key, _ => new Slot)
    slot.building.lockInterruptibly()
    try {
      if (slot.value == null || (slot.source ne source)) {
        slot.value = null
        slot.value = build
        slot.source = source
      }
      slot.value
    } finally {
      slot.building.unlock()
    }
  }

  /** Relations whose gathered output this executor no longer holds. */
  private def forgetReleased(): Unit = {
    val env = SparkEnv.get
    if (env == null) return
    val held = env.blockManager
      .getMatchingBlockIds {
        case RDDBlockId(_, _) => true
        case _                => false
      }
      .collect { case RDDBlockId(rdd, _) => rdd }
      .toSet
    slots.entrySet().removeIf { e =>
      e.getKey._1 >= 0 && !held.contains(e.getKey._1) && e.getValue.value != null
    }
  }
}

/** Spark's hash join over an [[ExecutorBuildExec]]: the stream side's tasks read the relation their
  * executor built, with Spark's own semantics for every join type the build side allows.
  */
case class ExecutorBroadcastHashJoinExec(
    leftKeys: Seq[org.apache.spark.sql.catalyst.expressions.Expression],
    rightKeys: Seq[org.apache.spark.sql.catalyst.expressions.Expression],
    joinType: JoinType,
    buildSide: BuildSide,
    condition: Option[org.apache.spark.sql.catalyst.expressions.Expression],
    left: SparkPlan,
    right: SparkPlan
) extends HashJoin {

  override lazy val metrics: Map[String, SQLMetric] = Map(
    "numOutputRows" -> SQLMetrics.createMetric(sparkContext, "number of output rows")
  )

  override def inputRDDs(): Seq[RDD[InternalRow]] =
    streamedPlan.asInstanceOf[CodegenSupport].inputRDDs()

  /** Whether a stream row may meet several build rows is unknown while the code is generated (the
    * relation exists only in the executors), so the result is copied as for duplicate keys.
    */
  override def needCopyResult: Boolean = joinType match {
    case _: InnerLike | LeftOuter | RightOuter => true
    case _ => streamedPlan.asInstanceOf[CodegenSupport].needCopyResult
  }

  /** Generated code over a relation that only the executors hold: its class, key uniqueness and
    * emptiness are not read here, on the driver, as Spark's broadcast hash join does; the code uses
    * the general form (`HashedRelation.get`, which is null for a missing key and for an empty
    * relation), correct for every relation the build side makes.
    */
  override protected def prepareRelation(ctx: CodegenContext): HashedRelationInfo = {
    val relation = buildPlan.executeBroadcast[HashedRelation]()
    val reference = ctx.addReferenceObj("executorRelation", relation)
    val className = classOf[HashedRelation].getName
    val term = ctx.addMutableState(
      className,
      "relation",
      v => s"""
        | $v = (($className) $reference.value()).asReadOnlyCopy();
        | incPeakExecutionMemory($v.estimatedSize());
      """.stripMargin,
      forceInline = true
    )
    HashedRelationInfo(term, keyIsUnique = false, isEmpty = false)
  }

  override protected def doExecute(): RDD[InternalRow] = {
    val numOutputRows = longMetric("numOutputRows")
    val relation = buildPlan.executeBroadcast[HashedRelation]()
    streamedPlan.execute().mapPartitions { streamedIter =>
      val hashed = relation.value.asReadOnlyCopy()
      TaskContext.get().taskMetrics().incPeakExecutionMemory(hashed.estimatedSize)
      join(streamedIter, hashed, numOutputRows)
    }
  }

  override protected def withNewChildrenInternal(
      newLeft: SparkPlan,
      newRight: SparkPlan
  ): ExecutorBroadcastHashJoinExec = copy(left = newLeft, right = newRight)
}
