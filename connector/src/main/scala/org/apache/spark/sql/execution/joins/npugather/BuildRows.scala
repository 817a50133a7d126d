package org.apache.spark.sql.execution.joins.npugather

import scala.jdk.CollectionConverters._

import io.npugather.spark.output.GatheredOutput
import org.apache.arrow.vector.VarBinaryVector
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.expressions.{
  Attribute,
  AttributeReference,
  UnsafeProjection,
  UnsafeRow
}
import org.apache.spark.sql.catalyst.expressions.codegen.UnsafeRowWriter
import org.apache.spark.sql.catalyst.plans.physical.Partitioning
import org.apache.spark.sql.execution.{SparkPlan, UnaryExecNode}
import org.apache.spark.sql.types.BinaryType
import org.apache.spark.sql.vectorized.{ArrowColumnVector, ColumnarBatch}
import org.apache.spark.unsafe.Platform
import org.apache.spark.unsafe.types.UTF8String

/** A join's build side as the executors gather it: every row as the bytes of Spark's [[UnsafeRow]],
  * in one binary column ([[BuildRows.asBytes]]), which the relations read in place
  * ([[BuildRowBytes]]). A probe's match is then an UnsafeRow over the gathered memory, as over the
  * pages of Spark's own relations: no copy, and one or two cache lines where a row spread over
  * columns costs one or more per column. Each rank writes its own rows in this form, so the
  * executors receive them ready to read, and no executor copies the table.
  */
object BuildRows {

  /** The name of the gathered column. */
  val Column = "build_row"

  /** `plan`'s rows as one binary column of their UnsafeRow bytes, in `plan.output`'s order. */
  def asBytes(plan: SparkPlan): SparkPlan =
    BuildRowsExec(AttributeReference(Column, BinaryType, nullable = false)(), plan)

  /** Every gathered row of `output` (rows of `fields` columns), batch after batch, as an UnsafeRow
    * over the gathered bytes: a new row object each (`fresh`, for callers that keep them), or one
    * object pointed at each row in turn.
    */
  def rowsOf(output: GatheredOutput, fields: Int, fresh: Boolean): Iterator[UnsafeRow] = {
    val reused = new UnsafeRow(fields)
    output.batches().asScala.map(BuildRowBytes.of).flatMap { batch =>
      Iterator.range(0, batch.rows).map { i =>
        val row = if (fresh) new UnsafeRow(fields) else reused
        batch.pointTo(row, i)
        row
      }
    }
  }
}

/** `child`'s rows as one binary column, `row`: the bytes of each row as an [[UnsafeRow]] of
  * `child.output`, in that order. A row that is already an UnsafeRow of those columns (what Spark's
  * operators produce) is copied once into the output row, with no projection.
  */
case class BuildRowsExec(row: Attribute, child: SparkPlan) extends UnaryExecNode {
  override def output: Seq[Attribute] = Seq(row)

  override def outputPartitioning: Partitioning = child.outputPartitioning

  override protected def doExecute(): RDD[InternalRow] = {
    val columns = child.output
    child.execute().mapPartitionsInternal(rows => BuildRowsExec.asBytes(columns, rows))
  }

  override protected def withNewChildInternal(newChild: SparkPlan): BuildRowsExec =
    copy(child = newChild)
}

object BuildRowsExec {

  /** `rows` of `columns` as rows of one binary column, their UnsafeRow bytes; the output row is
    * reused.
    */
  def asBytes(columns: Seq[Attribute], rows: Iterator[InternalRow]): Iterator[InternalRow] = {
    val toUnsafe = UnsafeProjection.create(columns, columns)
    val writer = new UnsafeRowWriter(1)
    rows.map { row =>
      val unsafe = row match {
        case u: UnsafeRow if u.numFields == columns.size => u
        case other                                       => toUnsafe(other)
      }
      writer.reset()
      writer.zeroOutNullBytes()
      // The row's bytes as the binary value, copied once; a UTF8String is only their address.
      writer.write(
        0,
        UTF8String.fromAddress(unsafe.getBaseObject, unsafe.getBaseOffset, unsafe.getSizeInBytes)
      )
      writer.getRow
    }
  }
}

/** The gathered row bytes of one batch (the binary column after the source rank), read in place:
  * valid while its output is held.
  */
private[npugather] final class BuildRowBytes private (
    val rows: Int,
    offsets: Long, // int offsets, rows + 1 of them
    data: Long
) {

  /** Points `row` at row `i`'s bytes. */
  def pointTo(row: UnsafeRow, i: Int): Unit = {
    val start = Platform.getInt(null, offsets + 4L * i)
    val end = Platform.getInt(null, offsets + 4L * (i + 1))
    row.pointTo(null, data + start, end - start)
  }
}

private[npugather] object BuildRowBytes {

  /** The row bytes of `batch`, a batch of an output gathered from [[BuildRows.asBytes]]. */
  def of(batch: ColumnarBatch): BuildRowBytes = {
    val rows = batch.numRows()
    if (rows == 0) new BuildRowBytes(0, 0L, 0L)
    else {
      val vector = batch.column(1).asInstanceOf[ArrowColumnVector].getValueVector
      vector match {
        case bytes: VarBinaryVector =>
          new BuildRowBytes(
            rows,
            bytes.getOffsetBuffer.memoryAddress(),
            bytes.getDataBuffer.memoryAddress()
          )
        case other =>
          throw new IllegalStateException(
            s"a gathered build side holds its rows in one binary column; found $other"
          )
      }
    }
  }
}
