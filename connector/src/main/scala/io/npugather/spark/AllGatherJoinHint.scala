package io.npugather.spark

import java.util.Locale

import org.apache.spark.SparkContext
import org.apache.spark.sql.catalyst.analysis.{UnresolvedAttribute, UnresolvedRelation}
import org.apache.spark.sql.catalyst.expressions.Attribute
import org.apache.spark.sql.catalyst.plans.logical.{
  LogicalPlan,
  Repartition,
  SubqueryAlias,
  UnaryNode,
  UnresolvedHint
}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.catalyst.trees.TreeNodeTag

/** The build side of a join that the ranks all-gather onto every executor instead of Spark's
  * broadcast ([[org.apache.spark.sql.execution.joins.npugather.AllGatherJoinStrategy]]): `child`,
  * gathered by one rank per task slot of the cluster, so that every executor runs a rank and holds
  * the gathered table. Where no join can build it, it is planned as `child` alone. `automatic`: put
  * there by the planner's own choice (`spark.npugather.join.auto`), not by a user. `metrics`: the
  * figures of the gathers planned from the mark ([[NpuAllGather.metrics]] says how they add up).
  */
case class AllGatherJoinHint(child: LogicalPlan, automatic: Boolean = false)(
    val metrics: GatherMetrics
) extends UnaryNode {
  override def output: Seq[Attribute] = child.output

  override protected def otherCopyArgs: Seq[AnyRef] = metrics :: Nil

  override protected def withNewChildInternal(newChild: LogicalPlan): AllGatherJoinHint =
    copy(child = newChild)(metrics)
}

object AllGatherJoinHint {

  /** The hint's name: `SELECT /*+ ALLGATHER(items) */ ...`, `df.hint("allgather")`. */
  val NAME = "ALLGATHER"

  /** `plan` marked as a build side. An automatic mark moves its side to the ranks through a shuffle
    * first (one partition per task slot of `sc`): under adaptive execution that shuffle's runtime
    * size judges the choice again (Spark's own plan for such a join, a sort-merge join, shuffles
    * that side as well). A hinted side is gathered where it lies when it has one partition per
    * slot.
    */
  def over(plan: LogicalPlan, sc: SparkContext, automatic: Boolean = false): AllGatherJoinHint = {
    val side =
      if (automatic) Repartition(math.max(1, sc.defaultParallelism), shuffle = true, plan) else plan
    AllGatherJoinHint(side, automatic)(new GatherMetrics(sc))
  }

  /** Why a mark was not used, for the plan's `explain()`. */
  val NotUsedReason: TreeNodeTag[String] = TreeNodeTag[String]("npugather.allGatherNotUsed")
}

/** Resolves the `ALLGATHER` hint (in the analyzer's hint batch, with the SQL extension): without
  * parameters it marks the hinted plan; with names, the relations and aliases of those names under
  * it, as Spark resolves its own join hints. Each mark's figures register with `sc`.
  */
case class ResolveAllGatherHint(sc: SparkContext) extends Rule[LogicalPlan] {
  override def apply(plan: LogicalPlan): LogicalPlan = plan.resolveOperatorsUp {
    case h: UnresolvedHint if h.name.toUpperCase(Locale.ROOT) == AllGatherJoinHint.NAME =>
      if (h.parameters.isEmpty) {
        AllGatherJoinHint.over(h.child, sc)
      } else {
        val names = h.parameters.map {
          case u: UnresolvedAttribute => u.nameParts.last.toLowerCase(Locale.ROOT)
          case other                  => other.toString.toLowerCase(Locale.ROOT)
        }.toSet
        mark(h.child, names)
      }
  }

  private def mark(plan: LogicalPlan, names: Set[String]): LogicalPlan = plan match {
    case _: AllGatherJoinHint => plan
    case r: UnresolvedRelation
        if names.contains(r.multipartIdentifier.last.toLowerCase(Locale.ROOT)) =>
      AllGatherJoinHint.over(r, sc)
    case s: SubqueryAlias if names.contains(s.alias.toLowerCase(Locale.ROOT)) =>
      AllGatherJoinHint.over(s, sc)
    case other => other.withNewChildren(other.children.map(mark(_, names)))
  }
}
