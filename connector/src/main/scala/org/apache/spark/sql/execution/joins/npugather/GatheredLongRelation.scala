package org.apache.spark.sql.execution.joins.npugather

import java.io.{ObjectInput, ObjectOutput}

import scala.jdk.CollectionConverters._

import io.npugather.spark.output.{GatheredOutput, LongRowIndex}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{
  Attribute,
  BoundReference,
  Expression,
  UnsafeProjection,
  UnsafeRow
}
import org.apache.spark.sql.catalyst.expressions.codegen.UnsafeRowWriter
import org.apache.spark.sql.execution.joins.{HashedRelationBroadcastMode, LongHashedRelation}
import org.apache.spark.sql.types.LongType
import org.apache.spark.sql.vectorized.ColumnarBatch

/** Spark's hash relation on one long key ([[LongHashedRelation]]: what
  * `HashedRelationBroadcastMode.transform` makes for such a key) over an executor's gathered
  * output, in place. The build reads the key of every gathered row once and indexes the row numbers
  * by key ([[LongRowIndex]]); a probe turns each matching row into an [[UnsafeRow]] as it is asked
  * for. Spark's own relation copies every row into pages of its own first, which is most of its
  * build time and a second copy of the table in the executor.
  *
  * The answers are Spark's: rows with a null key are left out, `get` gives every row of a key and
  * null for a missing one, `getValue` one of them. It reads the output's memory, so it is used only
  * by tasks that hold the output's block (read-locked, [[ExecutorRelation]]), each through its own
  * copy ([[over]], [[asReadOnlyCopy]]): batch objects and a projection of its own over the shared
  * vectors and index.
  */
final class GatheredLongRelation private (
    index: LongRowIndex,
    output: GatheredOutput,
    valueColumns: Seq[BoundReference]
) extends LongHashedRelation(valueColumns.size, null) {

  private val batches: Array[ColumnarBatch] = output.batches().asScala.toArray
  private val project = UnsafeProjection.create(valueColumns)

  /** The same relation read through `readable`, an output of the same gather this task holds. */
  def over(readable: GatheredOutput): GatheredLongRelation =
    new GatheredLongRelation(index, readable, valueColumns)

  override def asReadOnlyCopy(): GatheredLongRelation = over(output)

  override def estimatedSize: Long = index.bytes()

  override def get(key: Long): Iterator[InternalRow] = {
    val first = index.first(key)
    if (first < 0) null
    else
      new Iterator[InternalRow] {
        private var at = first
        override def hasNext: Boolean = at >= 0
        override def next(): InternalRow = {
          val row = rowAt(at)
          at = index.next(at)
          row
        }
      }
  }

  override def getValue(key: Long): InternalRow = {
    val first = index.first(key)
    if (first < 0) null else rowAt(first)
  }

  override def keyIsUnique: Boolean = index.keyIsUnique()

  override def keys(): Iterator[InternalRow] = {
    val writer = new UnsafeRowWriter(1)
    index.keys().asScala.map { key =>
      writer.reset()
      writer.write(0, key.longValue)
      writer.getRow
    }
  }

  override def close(): Unit = ()

  override def writeExternal(out: ObjectOutput): Unit =
    throw new UnsupportedOperationException(
      "a gathered relation is built in each executor from its own output and never serialized"
    )

  override def readExternal(in: ObjectInput): Unit = writeExternal(null)

  /** Gathered row `row` as Spark's relation gives it: an UnsafeRow, reused by the next call. */
  private def rowAt(row: Int): UnsafeRow = {
    val batch = index.batchOf(row)
    project(batches(batch).getRow(row - index.batchStart(batch)))
  }

  override def toString: String = s"GatheredLongRelation($index)"
}

object GatheredLongRelation {

  /** Whether Spark makes a [[LongHashedRelation]] in `mode` (one key of type long, null keys left
    * out), which this relation stands in for.
    */
  def handles(mode: HashedRelationBroadcastMode): Boolean =
    !mode.isNullAware && mode.key.size == 1 && mode.key.head.dataType == LongType

  /** The relation of `output`'s rows, whose columns after the source rank are `buildOutput`, keyed
    * by `key` (bound to `buildOutput`).
    */
  def build(
      output: GatheredOutput,
      key: Expression,
      buildOutput: Seq[Attribute]
  ): GatheredLongRelation = {
    // The batches' first column is the source rank.
    val shifted = key.transform { case BoundReference(i, dataType, nullable) =>
      BoundReference(i + 1, dataType, nullable)
    }
    val keyOf = UnsafeProjection.create(Seq(shifted))
    val keys = LongRowIndex.builder(output.totalRows())
    output.batches().asScala.foreach { batch =>
      val rows = batch.numRows()
      var row = 0
      while (row < rows) {
        val k = keyOf(batch.getRow(row))
        if (k.isNullAt(0)) keys.addNull() else keys.add(k.getLong(0))
        row += 1
      }
      keys.endBatch()
    }
    val valueColumns = buildOutput.zipWithIndex.map { case (a, i) =>
      BoundReference(i + 1, a.dataType, a.nullable)
    }
    new GatheredLongRelation(keys.build(), output, valueColumns)
  }
}
