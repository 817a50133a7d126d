package org.apache.spark.sql.execution.joins.npugather

import scala.jdk.CollectionConverters._

import io.npugather.spark.output.GatheredOutput
import org.apache.arrow.vector.VarBinaryVector
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{
  Alias,
  BoundReference,
  Expression,
  UnsafeProjection,
  UnsafeRow
}
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback
import org.apache.spark.sql.execution.{ProjectExec, SparkPlan}
import org.apache.spark.sql.types.{BinaryType, DataType}
import org.apache.spark.sql.vectorized.{ArrowColumnVector, ColumnarBatch}
import org.apache.spark.unsafe.Platform

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
    ProjectExec(Seq(Alias(RowBytes(plan.output), Column)()), plan)

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

/** The bytes of its children's values as one [[UnsafeRow]] (a row of the plan under it, once
  * bound). Never null: a null value is a bit of the row.
  */
case class RowBytes(children: Seq[Expression]) extends Expression with CodegenFallback {
  // Made where it is evaluated: each task's copy of the plan has its own.
  @transient private lazy val project = UnsafeProjection.create(children)

  /** Whether the children are the input's columns in order: an input UnsafeRow is then the row. */
  @transient private lazy val wholeInput = children.zipWithIndex.forall {
    case (BoundReference(ordinal, _, _), i) => ordinal == i
    case _                                  => false
  }

  override def nullable: Boolean = false

  override def dataType: DataType = BinaryType

  override def eval(input: InternalRow): Any = input match {
    case row: UnsafeRow if wholeInput && row.numFields == children.size => row.getBytes
    case _                                                              => project(input).getBytes
  }

  override def prettyName: String = "unsafe_row_bytes"

  override protected def withNewChildrenInternal(newChildren: IndexedSeq[Expression]): RowBytes =
    copy(children = newChildren)
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
