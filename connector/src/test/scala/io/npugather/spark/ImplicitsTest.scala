package io.npugather.spark

import org.apache.spark.sql.{Dataset, SparkSession}
import org.junit.jupiter.api.{AfterAll, BeforeAll, Test}
import org.junit.jupiter.api.Assertions.assertEquals

import io.npugather.spark.implicits._
import io.npugather.spark.testing.LocalSpark

/** An element type of a typed Dataset. */
case class Item(id: Long, name: String, embedding: Array[Float])

object ImplicitsTest {
  private var spark: SparkSession = _

  @BeforeAll
  def startSpark(): Unit = {
    spark = LocalSpark.cores(2).start("ImplicitsTest")
  }

  @AfterAll
  def stopSpark(): Unit = spark.stop()
}

/** The Scala entry point: one import gives every DataFrame and Dataset `allGatherOnNpu`. */
class ImplicitsTest {
  import ImplicitsTest.spark

  @Test
  def allGatherOnNpuIsAMethodOfEveryDataFrameAfterOneImport(): Unit = {
    val df = spark.range(0, 10, 1, 2).toDF("id")
    val gathered = df.allGatherOnNpu(Map("npugather.sourceRankColumn" -> "rank"))
    val partitions = gathered.rdd.glom().collect()
    assertEquals(2, partitions.length)
    val expected = (0L until 10L).map(id => (if (id < 5) 0 else 1, id))
    partitions.foreach { rows =>
      assertEquals(expected, rows.map(r => (r.getInt(0), r.getLong(1))).toSeq)
    }
    assertEquals(
      Seq("rank", "id"),
      df.allGatherOnNpu().withColumnRenamed("source_rank", "rank").columns.toSeq
    )
    assertEquals(Seq("r", "id"), df.allGatherOnNpu(Map("sourceRankColumn" -> "r")).columns.toSeq)
  }

  @Test
  def aTypedDatasetGathersIntoADatasetOfTheSameTypeInRankOrder(): Unit = {
    val session = spark
    import session.implicits._
    val items = (0 until 6).map(i => Item(i, s"item $i", Array.fill(3)(i * 0.5f)))
    val ds: Dataset[Item] = items.toDS().repartition(2).sortWithinPartitions("id")
    val byRank = ds.rdd.glom().collect().map(_.map(_.id).toSeq).toSeq

    val gathered: Dataset[Item] = ds.allGatherOnNpu(Map("timeout" -> "60s"))
    assertEquals(ds.schema, gathered.schema)
    val partitions = gathered.rdd.glom().collect()
    assertEquals(2, partitions.length)
    partitions.foreach { rows =>
      assertEquals(byRank.flatten, rows.map(_.id).toSeq)
      rows.foreach { item =>
        assertEquals(s"item ${item.id}", item.name)
        assertEquals(Seq.fill(3)(item.id * 0.5f), item.embedding.toSeq)
      }
    }
    val ids: Dataset[Long] = spark.range(0, 4, 1, 2).as[Long].map(_ * 10)
    assertEquals(Seq(0L, 10L, 20L, 30L, 0L, 10L, 20L, 30L), ids.allGatherOnNpu().collect().toSeq)
  }
}
