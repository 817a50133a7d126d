package io.npugather.spark

import org.apache.spark.npugather.NpuGatherSqlConf
import org.apache.spark.sql.SparkSessionExtensions
import org.apache.spark.sql.execution.joins.npugather.{
  AllGatherJoinStrategy,
  ChooseAllGatherJoins,
  PullUpAllGatherJoinHint
}

/** The connector as a Spark SQL extension, for `spark-defaults.conf` or `--conf`:
  * `spark.sql.extensions=io.npugather.spark.NpuGatherExtensions`. Every session of the application
  * then plans `allGatherOnNpu` and joins with the `ALLGATHER` hint from its start (and, with
  * `spark.npugather.join.auto`, picks such joins by size) and lists the `spark.npugather.*`
  * settings in `SET -v`; its SQL knows `all_gather_on_npu(TABLE(t), option => value ...)`
  * ([[AllGatherTableFunction]]); on the driver it records the ranks' exceptions ([[TaskFailures]]).
  * Without it, the first `allGatherOnNpu` of a session does the same.
  */
class NpuGatherExtensions extends (SparkSessionExtensions => Unit) {
  override def apply(extensions: SparkSessionExtensions): Unit = {
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
