package io.npugather.spark

import scala.jdk.CollectionConverters._

import org.apache.spark.SparkContext
import org.apache.spark.internal.Logging
import org.apache.spark.npugather.NpuGatherSqlConf
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, Project}
import org.apache.spark.sql.execution.joins.npugather.{
  AllGatherJoinStrategy,
  ChooseAllGatherJoins,
  PullUpAllGatherJoinHint
}

/** Builds the allGatherOnNpu logical plan and teaches the session to plan it. */
object NpuGatherPlanning extends Logging {

  /** The gather over `input`, which must already have one partition per rank, with figures of its
    * own. The source-rank column enters the plan as a placeholder alias in a projection under the
    * gather (the gather fills it), so Spark's analyzer renews it like any alias when a plan holds
    * the same gather twice (a self-join).
    */
  def node(input: LogicalPlan, options: AllGatherOptions, sc: SparkContext): LogicalPlan = {
    val placeholder = NpuAllGather.sourceRankPlaceholder(options.sourceRankColumn)
    NpuAllGather(placeholder.toAttribute, options, Project(input.output :+ placeholder, input))(
      new GatherMetrics(sc)
    )
  }

  /** What [[NpuGatherExtensions]] installs, for a session started without it: the planner strategy
    * (unless the session has it) and the driver side.
    */
  def install(session: SparkSession): Unit = session.synchronized {
    installDriverSide(session)
    val planned = session.sessionState.planner.strategies
    for (
      strategy <- Seq(NpuAllGatherStrategy, AllGatherJoinStrategy) if !planned.contains(strategy)
    ) {
      session.experimental.extraStrategies = session.experimental.extraStrategies :+ strategy
    }
    for (rule <- Seq(PullUpAllGatherJoinHint, ChooseAllGatherJoins)) {
      if (!session.experimental.extraOptimizations.contains(rule)) {
        session.experimental.extraOptimizations = session.experimental.extraOptimizations :+ rule
      }
    }
  }

  /** The settings in Spark's SQL conf and the driver's record of the ranks' exceptions; warns, once
    * per session, about `spark.npugather.*` keys of the application's conf that are no setting (a
    * gather refuses them). Spark asks the extension for its planner strategies for every plan, so
    * this runs for every plan.
    */
  def installDriverSide(session: org.apache.spark.sql.SparkSession): Unit = {
    NpuGatherSqlConf.register()
    TaskFailures.installOn(session.sparkContext)
    if (
      checkedSessions.synchronized(checkedSessions.put(session, java.lang.Boolean.TRUE) == null)
    ) {
      try {
        NpuGatherConf.requireKnownKeys(session.sparkContext.getConf.getAll.toMap.asJava)
      } catch {
        case e: IllegalArgumentException => logWarning(e.getMessage)
      }
    }
  }

  /** The sessions whose application conf was checked for unknown keys. */
  private val checkedSessions =
    new java.util.WeakHashMap[org.apache.spark.sql.SparkSession, java.lang.Boolean]()
}
