package io.npugather.spark

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.AttributeReference
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.types.IntegerType

/** Builds the allGatherOnNpu logical plan and teaches the session to plan it. */
object NpuGatherPlanning {

  /** The gather over `input`, which must already have one partition per rank. */
  def node(input: LogicalPlan, options: AllGatherOptions): LogicalPlan = {
    val sourceRank = AttributeReference(options.sourceRankColumn, IntegerType, nullable = false)()
    NpuAllGather(sourceRank, options, input)
  }

  /** Adds the planner strategy to the session once. */
  def install(session: SparkSession): Unit = session.synchronized {
    val strategies = session.experimental.extraStrategies
    if (!strategies.contains(NpuAllGatherStrategy)) {
      session.experimental.extraStrategies = strategies :+ NpuAllGatherStrategy
    }
  }
}
