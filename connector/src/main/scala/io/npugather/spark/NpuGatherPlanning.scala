package io.npugather.spark

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{Alias, Literal}
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, Project}

/** Builds the allGatherOnNpu logical plan and teaches the session to plan it. */
object NpuGatherPlanning {

  /**
   * The gather over `input`, which must already have one partition per rank. The source-rank
   * column enters the plan as a placeholder alias in a projection under the gather (the gather
   * fills it), so Spark's analyzer renews it like any alias when a plan holds the same gather
   * twice (a self-join).
   */
  def node(input: LogicalPlan, options: AllGatherOptions): LogicalPlan = {
    val placeholder = Alias(Literal(0), options.sourceRankColumn)()
    NpuAllGather(placeholder.toAttribute, options, Project(input.output :+ placeholder, input))
  }

  /** Adds the planner strategy to the session once. */
  def install(session: SparkSession): Unit = session.synchronized {
    val strategies = session.experimental.extraStrategies
    if (!strategies.contains(NpuAllGatherStrategy)) {
      session.experimental.extraStrategies = strategies :+ NpuAllGatherStrategy
    }
  }
}
