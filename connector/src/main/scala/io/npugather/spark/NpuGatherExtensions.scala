package io.npugather.spark

import org.apache.spark.npugather.NpuGatherSqlConf
import org.apache.spark.sql.SparkSessionExtensions
import org.apache.spark.sql.execution.joins.npugather.{
  AllGatherJoinStrategy,
  ChooseAllGatherJoins,
  PullUpAllGatherJoinHint
}
import org.slf4j.LoggerFactory

/** The connector as a Spark SQL extension, for `spark-defaults.conf` or `--conf`:
  * `spark.sql.extensions=io.npugather.spark.NpuGatherExtensions`. Every session of the application
  * then plans `allGatherOnNpu` and joins with the `ALLGATHER` hint from its start (and, with
  * `spark.npugather.join.auto`, picks such joins by size) and lists the `spark.npugather.*`
  * settings in `SET -v`; its SQL knows `all_gather_on_npu(TABLE(t), option => value ...)`
  * ([[AllGatherTableFunction]]); on the driver it records the ranks' exceptions ([[TaskFailures]]).
  * Without it, the first `allGatherOnNpu` of a session does the same. Without the operator API on
  * the classpath ([[CoreClasspath]]) it logs one line naming the jars to add and adds nothing.
  */
class NpuGatherExtensions extends (SparkSessionExtensions => Unit) {
  override def apply(extensions: SparkSessionExtensions): Unit = {
    val missing = CoreClasspath.missing()
    if (missing != null) {
      // Spark would log the missing class's stack and go on: one line instead, and a session
      // without the connector's rules, whose gathers fail with the same line.
      LoggerFactory
        .getLogger(classOf[NpuGatherExtensions])
        .warn(s"$missing; ${getClass.getName} is not applied")
      return
    }
    NpuGatherSqlConf.register()
    extensions.injectPlannerStrategy { session =>
      NpuGatherPlanning.installDriverSide(session)
      NpuAllGatherStrategy
    }
    extensions.injectHintResolutionRule(session => ResolveAllGatherHint(session.sparkContext))
    extensions.injectOptimizerRule(_ => PullUpAllGatherJoinHint)
    extensions.injectOptimizerRule(_ => ChooseAllGatherJoins)
    extensions.injectPlannerStrategy(_ => AllGatherJoinStrategy)
    extensions.injectTableFunction(AllGatherTableFunction.description)
  }
}
