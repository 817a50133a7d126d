package org.apache.spark.npugather

import scala.jdk.CollectionConverters._

import io.npugather.spark.{NpuGatherConf, Setting}
import org.apache.spark.SparkEnv
import org.apache.spark.internal.config.ConfigEntry
import org.apache.spark.sql.internal.SQLConf

/** The settings of [[NpuGatherConf]] as entries of Spark's SQL conf, built with Spark's own
  * `ConfigBuilder` (kept inside Spark's packages): `SET -v` lists each with its default and doc,
  * and Spark checks a value when it is set. Application-wide settings are static: a running session
  * refuses to change them.
  */
object NpuGatherSqlConf {
  private val Version = "0.1.0"

  /** Registered once per class loader; a key another copy of the connector registered stays. */
  private lazy val entries: Seq[ConfigEntry[_]] = NpuGatherConf.SETTINGS.asScala.toSeq.flatMap {
    setting =>
      val key = setting.confKey
      val builder = setting.scope match {
        case Setting.Scope.APPLICATION => SQLConf.buildStaticConf(key)
        case _                         => SQLConf.buildConf(key)
      }
      val typed = builder.doc(setting.confDoc).version(Version).stringConf.transform { value =>
        if (!isApplicationValue(key, value)) {
          setting.read(key, value)
        }
        value
      }
      try {
        Some(
          if (setting.defaultText == null) typed.createOptional
          else typed.createWithDefault(setting.defaultText)
        )
      } catch {
        case e: IllegalArgumentException if e.getMessage.contains("Duplicate") => None
      }
  }

  /** True when `value` is the application's own (spark-defaults.conf, `--conf`): every session
    * copies those into its SQL conf when it starts, and a bad one would fail every query of the
    * session. The gathers check it when they read it, and fail with the same message; values set in
    * a running session are checked when they are set.
    */
  private def isApplicationValue(key: String, value: String): Boolean =
    Option(SparkEnv.get).flatMap(_.conf.getOption(key)).contains(value)

  /** Adds every setting to Spark's SQL conf, once. */
  def register(): Unit = entries
}
