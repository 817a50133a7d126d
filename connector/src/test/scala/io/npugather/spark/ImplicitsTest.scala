package io.npugather.spark

import org.apache.spark.sql.SparkSession
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Test

import io.npugather.spark.implicits._

/** The Scala entry point: one import gives every DataFrame `allGatherOnNpu`. */
class ImplicitsTest {

  @Test
  def allGatherOnNpuIsAMethodOfEveryDataFrameAfterOneImport(): Unit = {
    val spark = SparkSession.builder().master("local[2]").appName("ImplicitsTest")
      .config("spark.ui.enabled", "false").getOrCreate()
    try {
      val df = spark.range(0, 10, 1, 2).toDF("id")
      val gathered = df.allGatherOnNpu(Map("npugather.sourceRankColumn" -> "rank"))
      val partitions = gathered.rdd.glom().collect()
      assertEquals(2, partitions.length)
      val expected = (0L until 10L).map(id => (if (id < 5) 0 else 1, id))
      partitions.foreach { rows =>
        assertEquals(expected, rows.map(r => (r.getInt(0), r.getLong(1))).toSeq)
      }
      assertEquals(Seq("rank", "id"), df.allGatherOnNpu().withColumnRenamed("source_rank", "rank")
        .columns.toSeq)
    } finally {
      spark.stop()
    }
  }
}
