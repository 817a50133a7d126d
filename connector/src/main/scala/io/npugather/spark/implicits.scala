package io.npugather.spark

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.DataFrame

/** `import io.npugather.spark.implicits._` gives every DataFrame `allGatherOnNpu`. */
object implicits {
  implicit class NpuGatherDataFrameOps(private val df: DataFrame) extends AnyVal {
    /** [[NpuGather.allGatherOnNpu]] with the session's defaults (`spark.npugather.*`). */
    def allGatherOnNpu(): DataFrame = NpuGather.allGatherOnNpu(df)

    def allGatherOnNpu(options: AllGatherOptions): DataFrame = NpuGather.allGatherOnNpu(df, options)

    /** Options as `npugather.*` keys, e.g. `Map("npugather.backend" -> "host")`. */
    def allGatherOnNpu(options: Map[String, String]): DataFrame =
      NpuGather.allGatherOnNpu(df, options.asJava)
  }
}
