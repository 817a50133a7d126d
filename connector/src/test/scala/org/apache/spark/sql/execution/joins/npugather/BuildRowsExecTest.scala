package org.apache.spark.sql.execution.joins.npugather

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{AttributeReference, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.types.{LongType, StringType}
import org.apache.spark.unsafe.types.UTF8String
import org.junit.jupiter.api.Assertions.{assertArrayEquals, assertEquals}
import org.junit.jupiter.api.Test

/** A build row's bytes are the UnsafeRow of its columns, whatever form its input has. */
class BuildRowsExecTest {
  private val columns = Seq(
    AttributeReference("a", LongType)(),
    AttributeReference("s", StringType)(),
    AttributeReference("b", LongType)()
  )

  private val inputs = Seq(
    InternalRow(7L, UTF8String.fromString("seven"), null),
    InternalRow(null, null, Long.MinValue),
    InternalRow(-1L, UTF8String.fromString(""), 3L)
  )

  /** The bytes each output row holds, copied out (the output row is reused). */
  private def bytesOf(rows: Seq[InternalRow]): Seq[Array[Byte]] =
    BuildRowsExec.asBytes(columns, rows.iterator).map(_.getBinary(0)).toList

  @Test
  def unsafeAndGenericRowsOfTheColumnsGiveTheirUnsafeRowBytes(): Unit = {
    val toUnsafe = UnsafeProjection.create(columns, columns)
    val expected = inputs.map(r => toUnsafe(r).getBytes)
    val fromUnsafe = bytesOf(inputs.map(r => toUnsafe(r).copy()))
    val fromGeneric = bytesOf(inputs)
    for (i <- inputs.indices) {
      assertArrayEquals(expected(i), fromUnsafe(i), s"row $i from an UnsafeRow")
      assertArrayEquals(expected(i), fromGeneric(i), s"row $i from a generic row")
      val row = new UnsafeRow(columns.size)
      row.pointTo(fromGeneric(i), fromGeneric(i).length)
      for (c <- columns.indices) {
        assertEquals(inputs(i).isNullAt(c), row.isNullAt(c), s"null of row $i column $c")
      }
      if (!inputs(i).isNullAt(1)) assertEquals(inputs(i).getUTF8String(1), row.getUTF8String(1))
      if (!inputs(i).isNullAt(2)) assertEquals(inputs(i).getLong(2), row.getLong(2))
    }
  }

  @Test
  def anUnsafeRowOfOtherColumnsIsProjected(): Unit = {
    val wider = columns :+ AttributeReference("extra", LongType)()
    val toWider = UnsafeProjection.create(wider, wider)
    val input = toWider(InternalRow(1L, UTF8String.fromString("x"), 2L, 3L)).copy()
    val bytes = bytesOf(Seq(input)).head
    val row = new UnsafeRow(columns.size)
    row.pointTo(bytes, bytes.length)
    assertEquals(columns.size, row.numFields)
    assertEquals(2L, row.getLong(2))
  }
}
