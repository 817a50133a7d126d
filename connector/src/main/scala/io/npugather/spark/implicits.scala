package io.npugather.spark

import scala.jdk.CollectionConverters._

import io.npugather.spark.connect.{ConnectDataFrames, ConnectGather}
import org.apache.spark.sql.{DataFrame, Dataset}

/** `import io.npugather.spark.implicits._` gives every DataFrame and every `Dataset[T]`
  * `allGatherOnNpu`, of classic sessions and of Spark Connect's Scala client alike. Options as a
  * map take the keys of [[AllGatherOptions.KEYS]] with or without their `npugather.` prefix:
  * `Map("backend" -> "host", "timeout" -> "60s")`.
  */
object implicits extends LowPriorityImplicits {
  implicit class NpuGatherDataFrameOps(private val df: DataFrame) extends AnyVal {

    /** [[NpuGather.allGatherOnNpu]] with the session's defaults (`spark.npugather.*`). */
    def allGatherOnNpu(): DataFrame = gather(df, Map.empty)

    def allGatherOnNpu(options: AllGatherOptions): DataFrame = NpuGather.allGatherOnNpu(df, options)

    def allGatherOnNpu(options: Map[String, String]): DataFrame = gather(df, options)
  }

  /** A Connect DataFrame goes to [[ConnectGather]] without loading [[NpuGather]], which needs
    * Spark's classic API: a Connect client's classpath may not have it.
    */
  private[spark] def gather(df: DataFrame, options: Map[String, String]): DataFrame =
    if (ConnectDataFrames.isConnect(df)) ConnectGather.allGatherOnNpu(df, options.asJava)
    else NpuGather.allGatherOnNpu(df, options.asJava)
}

/** The `Dataset[T]` methods; a DataFrame takes those of [[implicits]] first. */
trait LowPriorityImplicits {

  /** On a `Dataset[T]` the gather keeps the type: every rank's partition holds every element,
    * rank-major, in each source partition's order. The source rank is not part of `T`; gather
    * `ds.toDF()` to have it as a column.
    */
  implicit class NpuGatherDatasetOps[T](private val ds: Dataset[T]) {
    def allGatherOnNpu(): Dataset[T] = typed(implicits.gather(ds.toDF(), Map.empty))

    def allGatherOnNpu(options: AllGatherOptions): Dataset[T] =
      typed(NpuGather.allGatherOnNpu(ds.toDF(), options))

    def allGatherOnNpu(options: Map[String, String]): Dataset[T] =
      typed(implicits.gather(ds.toDF(), options))

    /** The gathered rows without the source-rank column, as `T` again. */
    private def typed(gathered: DataFrame): Dataset[T] =
      gathered.select(ds.columns.toIndexedSeq.map(quoted).map(gathered.col): _*).as(ds.encoder)

    private def quoted(column: String): String = "`" + column.replace("`", "``") + "`"
  }
}
