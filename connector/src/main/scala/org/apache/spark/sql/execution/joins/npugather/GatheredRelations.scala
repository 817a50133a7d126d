package org.apache.spark.sql.execution.joins.npugather

import java.io.{ObjectInput, ObjectOutput}

import scala.jdk.CollectionConverters._

import com.esotericsoftware.kryo.Kryo
import com.esotericsoftware.kryo.io.{Input, Output}
import io.npugather.spark.output.{GatheredOutput, KeyRowIndex, LongRowIndex, RowIndex, RowNumbering}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{
  Attribute,
  Expression,
  UnsafeProjection,
  UnsafeRow
}
import org.apache.spark.sql.catalyst.expressions.codegen.UnsafeRowWriter
import org.apache.spark.sql.execution.joins.{
  HashedRelation,
  HashedRelationBroadcastMode,
  LongHashedRelation,
  UnsafeHashedRelation,
  ValueRowWithKeyIndex
}
import org.apache.spark.sql.types.LongType

/** Spark's hash relations of a join's build side, over an executor's gathered output in place: an
  * index from key to row numbers ([[LongRowIndex]] on one long key, [[KeyRowIndex]] on any other)
  * over the gathered [[UnsafeRow]] bytes ([[BuildRows]]); a match is an UnsafeRow pointed at them.
  * The build reads the keys of the gathered rows once; Spark's own relations copy every row into
  * pages of their own first, which is most of their build time and a second copy of the table in
  * the executor.
  *
  * The answers are Spark's (`HashedRelation.apply` on the same rows): rows with a null key (any
  * null column of it) are left out, `get` gives every row of a key and null for a missing one,
  * `getValue` one of them. A relation reads the output's memory, so it is used only by tasks that
  * hold the output's block (read-locked, [[ExecutorRelation]]), each through its own copy
  * ([[OverGatheredRows.over]], `asReadOnlyCopy`): a row object of its own over the shared rows and
  * index.
  */
object GatheredRelation {

  /** Whether Spark makes a hash relation of keys in `mode` (not the null-aware form of an anti
    * join), which one of these relations stands in for.
    */
  def handles(mode: HashedRelationBroadcastMode): Boolean = !mode.isNullAware

  /** The relation of `output`'s rows (gathered as [[BuildRows]] of `buildOutput`), by `mode`'s keys
    * (bound to `buildOutput`). `output` has at least one row: Spark's relation of none is its empty
    * relation.
    */
  def build(
      output: GatheredOutput,
      mode: HashedRelationBroadcastMode,
      buildOutput: Seq[Attribute]
  ): HashedRelation = {
    val rows = new IndexedRows(output, buildOutput.size)
    if (mode.key.size == 1 && mode.key.head.dataType == LongType) {
      new GatheredLongRelation(longIndex(rows, mode.key.head), rows)
    } else {
      new GatheredKeyRelation(keyIndex(rows, mode.key), mode.key.size, rows)
    }
  }

  private def longIndex(rows: IndexedRows, key: Expression): LongRowIndex = {
    val keyOf = UnsafeProjection.create(Seq(key))
    val index = LongRowIndex.builder(rows.output.totalRows())
    rows.foreach(index.endBatch()) { row =>
      val k = keyOf(row)
      if (k.isNullAt(0)) index.addNull() else index.add(k.getLong(0))
    }
    index.build()
  }

  private def keyIndex(rows: IndexedRows, keys: Seq[Expression]): KeyRowIndex = {
    val keyOf = UnsafeProjection.create(keys)
    val index = KeyRowIndex.builder(rows.output.totalRows())
    rows.foreach(index.endBatch()) { row =>
      val k = keyOf(row)
      if (k.anyNull()) index.addNull()
      else index.add(k.getBaseObject, k.getBaseOffset, k.getSizeInBytes, k.hashCode())
    }
    index.build()
  }

  private[npugather] def notSerialized(): Nothing =
    throw new UnsupportedOperationException(
      "a gathered relation is built in each executor from its own output and never serialized"
    )
}

/** A relation over gathered rows in place, read by each task through the output it holds. */
private[npugather] trait OverGatheredRows {

  /** The same relation read through `readable`, an output of the same gather this task holds. */
  def over(readable: GatheredOutput): HashedRelation
}

/** One reader of the rows an index numbers: the gathered rows of `fields` columns ([[BuildRows]]),
  * and its own row object that points at one of them at a time.
  */
private[npugather] final class IndexedRows(val output: GatheredOutput, val fields: Int) {
  private val batches: Array[BuildRowBytes] = output.batches().asScala.map(BuildRowBytes.of).toArray
  private val row = new UnsafeRow(fields)

  /** Another reader of the same rows, through `readable` (an output of the same gather). */
  def over(readable: GatheredOutput): IndexedRows = new IndexedRows(readable, fields)

  /** Row `n` as Spark's relations give it: an UnsafeRow over its bytes, moved by the next call. */
  def apply(numbering: RowNumbering, n: Int): UnsafeRow = {
    val batch = numbering.batchOf(n)
    batches(batch).pointTo(row, n - numbering.batchStart(batch))
    row
  }

  /** The rows of a key from `first` (null when there is none), each the one after the last in
    * `index`'s chain: a new iterator, as Spark's relations give, over this reader's row object.
    */
  def chain(index: RowIndex, first: Int): Iterator[InternalRow] =
    if (first < 0) null
    else
      new Iterator[InternalRow] {
        private var at = first
        override def hasNext: Boolean = at >= 0
        override def next(): InternalRow = {
          val row = IndexedRows.this(index.numbering(), at)
          at = index.next(at)
          row
        }
      }

  /** `f` of every row, batch after batch, `endBatch` after each. */
  def foreach(endBatch: => Unit)(f: UnsafeRow => Unit): Unit =
    batches.foreach { batch =>
      var i = 0
      while (i < batch.rows) {
        batch.pointTo(row, i)
        f(row)
        i += 1
      }
      endBatch
    }
}

/** Spark's relation on one long key ([[LongHashedRelation]]) over gathered rows in place. */
final class GatheredLongRelation private[npugather] (index: LongRowIndex, rows: IndexedRows)
    extends LongHashedRelation(rows.fields, null)
    with OverGatheredRows {

  override def over(readable: GatheredOutput): GatheredLongRelation =
    new GatheredLongRelation(index, rows.over(readable))

  override def asReadOnlyCopy(): GatheredLongRelation = over(rows.output)

  override def estimatedSize: Long = index.bytes()

  override def get(key: Long): Iterator[InternalRow] =
    rows.chain(index, index.first(key))

  override def getValue(key: Long): InternalRow = {
    val first = index.first(key)
    if (first < 0) null else rows(index.numbering(), first)
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

  override def writeExternal(out: ObjectOutput): Unit = GatheredRelation.notSerialized()

  override def readExternal(in: ObjectInput): Unit = GatheredRelation.notSerialized()

  override def toString: String = s"GatheredLongRelation(dense or hashed: $index)"
}

/** Spark's relation on any other key ([[UnsafeHashedRelation]]) over gathered rows in place. */
final class GatheredKeyRelation private[npugather] (
    index: KeyRowIndex,
    keyFields: Int,
    rows: IndexedRows
) extends UnsafeHashedRelation(keyFields, rows.fields, null)
    with OverGatheredRows {

  override def over(readable: GatheredOutput): GatheredKeyRelation =
    new GatheredKeyRelation(index, keyFields, rows.over(readable))

  override def asReadOnlyCopy(): GatheredKeyRelation = over(rows.output)

  override def estimatedSize: Long = index.bytes()

  override def get(key: InternalRow): Iterator[InternalRow] =
    rows.chain(index, first(key))

  override def getValue(key: InternalRow): InternalRow = {
    val row = first(key)
    if (row < 0) null else rows(index.numbering(), row)
  }

  /** The first row of `key`, Spark's key row of the stream side (an UnsafeRow, as for Spark's
    * relation), or -1.
    */
  private def first(key: InternalRow): Int = {
    val k = key.asInstanceOf[UnsafeRow]
    index.first(k.getBaseObject, k.getBaseOffset, k.getSizeInBytes, k.hashCode())
  }

  override def keyIsUnique: Boolean = index.keyIsUnique()

  override def keys(): Iterator[InternalRow] = {
    val key = new UnsafeRow(keyFields)
    index.keySlots().asScala.map { slot =>
      key.pointTo(index.keyBase(), index.keyOffset(slot), index.keyLength(slot))
      key
    }
  }

  // The forms for a full outer join, which these joins never are.
  override def getWithKeyIndex(key: InternalRow): Iterator[ValueRowWithKeyIndex] =
    throw new UnsupportedOperationException("getWithKeyIndex")

  override def getValueWithKeyIndex(key: InternalRow): ValueRowWithKeyIndex =
    throw new UnsupportedOperationException("getValueWithKeyIndex")

  override def valuesWithKeyIndex(): Iterator[ValueRowWithKeyIndex] =
    throw new UnsupportedOperationException("valuesWithKeyIndex")

  override def maxNumKeysIndex: Int = throw new UnsupportedOperationException("maxNumKeysIndex")

  override def close(): Unit = ()

  override def writeExternal(out: ObjectOutput): Unit = GatheredRelation.notSerialized()

  override def readExternal(in: ObjectInput): Unit = GatheredRelation.notSerialized()

  override def write(kryo: Kryo, out: Output): Unit = GatheredRelation.notSerialized()

  override def read(kryo: Kryo, in: Input): Unit = GatheredRelation.notSerialized()

  override def toString: String = s"GatheredKeyRelation($index)"
}
