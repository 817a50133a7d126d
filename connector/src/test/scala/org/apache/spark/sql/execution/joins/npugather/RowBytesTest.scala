package org.apache.spark.sql.execution.joins.npugather

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{BoundReference, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.types.{DataType, LongType, StringType}
import org.apache.spark.unsafe.types.UTF8String
import org.junit.jupiter.api.Assertions.{assertArrayEquals, assertEquals, assertTrue}
import org.junit.jupiter.api.Test

/** A build row's bytes are the UnsafeRow of its columns, whatever form its input has. */
class RowBytesTest {
  private val types: Seq[DataType] = Seq(LongType, StringType, LongType)
  private val columns = types.zipWithIndex.map { case (t, i) => BoundReference(i, t, true) }

  private def rowOf(bytes: Array[Byte], fields: Int): UnsafeRow = {
    val row = new UnsafeRow(fields)
    row.pointTo(bytes, bytes.length)
    row
  }

  private val inputs = Seq(
    InternalRow(7L, UTF8String.fromString("seven"), null),
    InternalRow(null, null, Long.MinValue),
    InternalRow(-1L, UTF8String.fromString(""), 3L)
  )

  @Test
  def anUnsafeRowInputOfTheSameColumnsAndAnyOtherGiveTheSameBytes(): Unit = {
    val toUnsafe = UnsafeProjection.create(columns)
    for (input <- inputs) {
      val unsafe = toUnsafe(input).copy()
      val fromUnsafe = RowBytes(columns).eval(unsafe).asInstanceOf[Array[Byte]]
      val fromGeneric = RowBytes(columns).eval(input).asInstanceOf[Array[Byte]]
      assertArrayEquals(unsafe.getBytes, fromUnsafe)
      assertArrayEquals(fromUnsafe, fromGeneric)
      val row = rowOf(fromGeneric, 3)
      for (i <- 0 until 3) {
        assertEquals(input.isNullAt(i), row.isNullAt(i), s"null of column $i")
      }
      if (!input.isNullAt(1)) assertEquals(input.getUTF8String(1), row.getUTF8String(1))
    }
  }

  @Test
  def columnsInAnotherOrderOrASubsetAreProjected(): Unit = {
    val reordered = Seq(columns(2), columns(0))
    val toUnsafe = UnsafeProjection.create(columns)
    for (input <- inputs) {
      val bytes = RowBytes(reordered).eval(toUnsafe(input)).asInstanceOf[Array[Byte]]
      val row = rowOf(bytes, 2)
      assertEquals(input.isNullAt(2), row.isNullAt(0))
      assertEquals(input.isNullAt(0), row.isNullAt(1))
      if (!input.isNullAt(2)) assertEquals(input.getLong(2), row.getLong(0))
      if (!input.isNullAt(0)) assertEquals(input.getLong(0), row.getLong(1))
      assertTrue(bytes.length % 8 == 0, "an UnsafeRow's size is a multiple of 8 bytes")
    }
  }
}
