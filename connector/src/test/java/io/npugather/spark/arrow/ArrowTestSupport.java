package io.npugather.spark.arrow;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import io.npugather.block.BlockLayout;
import io.npugather.block.LocalBlock;
import io.npugather.block.ReceiveDisplacements;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.util.MemoryUtil;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.VectorUnloader;
import org.apache.arrow.vector.ipc.message.ArrowFieldNode;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.SpecializedGetters;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.util.ArrayBasedMapData;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.catalyst.util.MapData;
import org.apache.spark.sql.execution.arrow.ArrowWriter;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.CalendarIntervalType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.DayTimeIntervalType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.NullType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimeType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.sql.types.VariantType;
import org.apache.spark.sql.types.YearMonthIntervalType;
import org.apache.spark.sql.util.ArrowUtils;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.CalendarInterval;
import org.apache.spark.unsafe.types.UTF8String;
import org.apache.spark.unsafe.types.VariantVal;

/** Random rows, a simulated all-gather-v and a value-by-value comparer for the Arrow tests. */
public final class ArrowTestSupport {
  private ArrowTestSupport() {}

  public static final String TZ = "America/Los_Angeles";

  // ------------------------------------------------------------------ random rows

  public static List<InternalRow> randomRows(StructType schema, int n, Random rnd, double nullP) {
    List<InternalRow> rows = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      rows.add(randomStruct(schema, rnd, nullP));
    }
    return rows;
  }

  public static InternalRow randomStruct(StructType schema, Random rnd, double nullP) {
    StructField[] fields = schema.fields();
    Object[] values = new Object[fields.length];
    for (int i = 0; i < fields.length; i++) {
      values[i] = randomValue(fields[i].dataType(), fields[i].nullable(), rnd, nullP);
    }
    return new GenericInternalRow(values);
  }

  public static Object randomValue(DataType t, boolean nullable, Random rnd, double nullP) {
    if (t instanceof NullType || (nullable && rnd.nextDouble() < nullP)) {
      return null;
    }
    if (t instanceof BooleanType) {
      return rnd.nextBoolean();
    } else if (t instanceof ByteType) {
      return (byte) rnd.nextInt();
    } else if (t instanceof ShortType) {
      return (short) rnd.nextInt();
    } else if (t instanceof IntegerType
        || t instanceof DateType
        || t instanceof YearMonthIntervalType) {
      return t instanceof DateType ? rnd.nextInt(200_000) - 100_000 : rnd.nextInt();
    } else if (t instanceof LongType || t instanceof DayTimeIntervalType) {
      return rnd.nextLong();
    } else if (t instanceof TimestampType || t instanceof TimestampNTZType) {
      return (long) ((rnd.nextDouble() - 0.5) * 2e16);
    } else if (t instanceof FloatType) {
      int k = rnd.nextInt(50);
      return k == 0 ? Float.NaN : k == 1 ? Float.NEGATIVE_INFINITY : (float) rnd.nextGaussian();
    } else if (t instanceof DoubleType) {
      int k = rnd.nextInt(50);
      return k == 0 ? Double.NaN : k == 1 ? -0.0 : rnd.nextGaussian() * 1e6;
    } else if (t instanceof DecimalType) {
      DecimalType d = (DecimalType) t;
      BigInteger unscaled = new BigInteger(Math.min(d.precision() * 3, 120), rnd);
      while (unscaled.toString().length() > d.precision()) {
        unscaled = unscaled.shiftRight(4);
      }
      if (rnd.nextBoolean()) {
        unscaled = unscaled.negate();
      }
      return Decimal.apply(new BigDecimal(unscaled, d.scale()), d.precision(), d.scale());
    } else if (t instanceof StringType) {
      int len = rnd.nextInt(12);
      StringBuilder sb = new StringBuilder();
      for (int i = 0; i < len; i++) {
        int k = rnd.nextInt(10);
        sb.append(k == 0 ? '\u00e9' : k == 1 ? '\u4e2d' : (char) ('a' + rnd.nextInt(26)));
      }
      if (rnd.nextInt(20) == 0) {
        sb.appendCodePoint(0x1F600);
      }
      return UTF8String.fromString(sb.toString());
    } else if (t instanceof BinaryType) {
      byte[] b = new byte[rnd.nextInt(17)];
      rnd.nextBytes(b);
      return b;
    } else if (t instanceof TimeType) {
      return (long) (rnd.nextDouble() * 86_400e9) / 1000 * 1000;
    } else if (t instanceof VariantType) {
      byte[] v = new byte[1 + rnd.nextInt(12)];
      byte[] m = new byte[1 + rnd.nextInt(6)];
      rnd.nextBytes(v);
      rnd.nextBytes(m);
      return new VariantVal(v, m);
    } else if (t instanceof CalendarIntervalType) {
      return new CalendarInterval(
          rnd.nextInt(1000), rnd.nextInt(1000), rnd.nextLong() % 1_000_000_000L);
    } else if (t instanceof ArrayType) {
      ArrayType a = (ArrayType) t;
      Object[] elems = new Object[rnd.nextInt(6)];
      for (int i = 0; i < elems.length; i++) {
        elems[i] = randomValue(a.elementType(), a.containsNull(), rnd, nullP);
      }
      return new GenericArrayData(elems);
    } else if (t instanceof MapType) {
      MapType m = (MapType) t;
      int n = rnd.nextInt(5);
      List<Object> keys = new ArrayList<>();
      List<Object> values = new ArrayList<>();
      Set<Object> seen = new HashSet<>();
      for (int i = 0; i < n; i++) {
        Object k = randomValue(m.keyType(), false, rnd, nullP);
        Object key =
            k instanceof byte[]
                ? new String((byte[]) k, java.nio.charset.StandardCharsets.ISO_8859_1)
                : k;
        if (seen.add(key)) {
          keys.add(k);
          values.add(randomValue(m.valueType(), m.valueContainsNull(), rnd, nullP));
        }
      }
      return new ArrayBasedMapData(
          new GenericArrayData(keys.toArray()), new GenericArrayData(values.toArray()));
    } else if (t instanceof StructType) {
      return randomStruct((StructType) t, rnd, nullP);
    }
    throw new IllegalArgumentException("no generator for " + t);
  }

  /** {@code rows} as Spark's UnsafeRows (what a cache or a shuffle holds). */
  public static List<InternalRow> unsafe(StructType schema, List<InternalRow> rows) {
    UnsafeProjection p = UnsafeProjection.create(schema);
    List<InternalRow> out = new ArrayList<>(rows.size());
    for (InternalRow r : rows) {
      out.add(p.apply(r).copy());
    }
    return out;
  }

  /** The Arrow schema Spark's own {@code ArrowWriter} writes {@code schema} with. */
  public static Schema sparkArrowSchema(StructType schema, String timeZoneId) {
    return ArrowUtils.toArrowSchema(schema, timeZoneId, true, false);
  }

  /**
   * Asserts that {@code got} holds the same nodes and buffers, byte for byte, as Spark's own
   * ArrowWriter writes for {@code rows}.
   */
  public static void assertSameBuffersAsSpark(
      StructType schema,
      List<InternalRow> rows,
      VectorSchemaRoot got,
      BufferAllocator a,
      String what) {
    try (VectorSchemaRoot r = VectorSchemaRoot.create(sparkArrowSchema(schema, TZ), a)) {
      ArrowWriter w = ArrowWriter.create(r);
      for (InternalRow row : rows) {
        w.write(row);
      }
      w.finish();
      try (ArrowRecordBatch want = new VectorUnloader(r).getRecordBatch();
          ArrowRecordBatch have = new VectorUnloader(got).getRecordBatch()) {
        assertEquals(want.getLength(), have.getLength(), what);
        List<ArrowFieldNode> wn = want.getNodes();
        List<ArrowFieldNode> gn = have.getNodes();
        assertEquals(wn.size(), gn.size(), what);
        for (int i = 0; i < wn.size(); i++) {
          assertEquals(wn.get(i).getLength(), gn.get(i).getLength(), what + ", node " + i);
          assertEquals(wn.get(i).getNullCount(), gn.get(i).getNullCount(), what + ", node " + i);
        }
        List<ArrowBuf> wb = want.getBuffers();
        List<ArrowBuf> gb = have.getBuffers();
        assertEquals(wb.size(), gb.size(), what);
        for (int i = 0; i < wb.size(); i++) {
          ArrowBuf x = wb.get(i);
          ArrowBuf y = gb.get(i);
          assertEquals(x.readableBytes(), y.readableBytes(), what + ", buffer " + i);
          for (long k = 0; k < x.readableBytes(); k++) {
            if (x.getByte(x.readerIndex() + k) != y.getByte(y.readerIndex() + k)) {
              throw new AssertionError(what + ", buffer " + i + " differs at byte " + k);
            }
          }
        }
      }
    }
  }

  /** Every fixed-width Spark type. */
  public static final DataType[] FIXED = {
    DataTypes.BooleanType,
    DataTypes.ByteType,
    DataTypes.ShortType,
    DataTypes.IntegerType,
    DataTypes.LongType,
    DataTypes.FloatType,
    DataTypes.DoubleType,
    DataTypes.DateType,
    DataTypes.TimestampType,
    DataTypes.TimestampNTZType
  };

  /** Every directly written type, nullable and not, as columns and as array elements. */
  public static StructType directSchema() {
    List<StructField> f = new ArrayList<>();
    for (DataType t : FIXED) {
      f.add(field(t.typeName(), t));
      f.add(notNull(t.typeName() + "_nn", t));
      f.add(field("a_" + t.typeName(), DataTypes.createArrayType(t, true)));
      f.add(notNull("a_" + t.typeName() + "_nn", DataTypes.createArrayType(t, false)));
    }
    return new StructType(f.toArray(new StructField[0]));
  }

  /** Direct columns between columns that go through Spark's field writers. */
  public static StructType mixedSchema() {
    return struct(
        field("s", DataTypes.StringType),
        field("features", DataTypes.createArrayType(DataTypes.FloatType, true)),
        field("dec", new DecimalType(20, 4)),
        notNull("id", DataTypes.LongType),
        field("strings", DataTypes.createArrayType(DataTypes.StringType, true)),
        field(
            "nested", DataTypes.createArrayType(DataTypes.createArrayType(DataTypes.IntegerType))),
        field("st", struct(field("x", DataTypes.DoubleType))),
        field("flag", DataTypes.BooleanType));
  }

  // ------------------------------------------------------------------ simulated collective

  /** A receive buffer holding every rank's block but {@code skipRank}'s, at {@code displs}. */
  public static ArrowBuf allGatherV(
      List<LocalBlock> ranks, long[] displs, int skipRank, BufferAllocator allocator) {
    long total = displs[ranks.size()];
    ArrowBuf recv = allocator.buffer(Math.max(total, 8));
    // Garbage everywhere first: padding and the skipped block must never be read.
    recv.setOne(0, recv.capacity());
    for (int r = 0; r < ranks.size(); r++) {
      if (r == skipRank) {
        continue;
      }
      LocalBlock p = ranks.get(r);
      if (r % 2 == 1) {
        // The contiguous-copy path a staging transport uses.
        p.copyTo(recv.memoryAddress() + displs[r]);
        continue;
      }
      long[] addr = p.segmentAddresses();
      long[] len = p.segmentLengths();
      assertEquals(addr.length, len.length);
      long pos = displs[r];
      for (int s = 0; s < addr.length; s++) {
        MemoryUtil.copyMemory(addr[s], recv.memoryAddress() + pos, len[s]);
        pos += len[s];
      }
      assertEquals(p.layout().blockBytes(), pos - displs[r], "segments of rank " + r);
    }
    return recv;
  }

  /** Every rank's displacement in a buffer holding every block, and the total as an extra entry. */
  public static long[] displacements(List<BlockLayout> layouts) {
    ReceiveDisplacements d = ReceiveDisplacements.of(layouts, -1);
    long[] displs = java.util.Arrays.copyOf(d.displacements(), layouts.size() + 1);
    displs[layouts.size()] = d.totalBytes();
    return displs;
  }

  // ------------------------------------------------------------------ comparison

  /** Checks {@code batch} (source-rank column, then the columns) against {@code expected}. */
  public static void assertBatch(
      StructType schema, List<InternalRow> expected, ColumnarBatch batch, int sourceRank) {
    assertEquals(expected.size(), batch.numRows(), "rows of rank " + sourceRank);
    assertEquals(schema.fields().length + 1, batch.numCols(), "columns of rank " + sourceRank);
    Iterator<InternalRow> it = batch.rowIterator();
    int i = 0;
    while (it.hasNext()) {
      InternalRow actual = it.next();
      assertEquals(false, actual.isNullAt(0));
      assertEquals(sourceRank, actual.getInt(0), "source rank of row " + i);
      InternalRow e = expected.get(i);
      for (int f = 0; f < schema.fields().length; f++) {
        StructField field = schema.fields()[f];
        assertValue(
            field.dataType(),
            e,
            f,
            actual,
            f + 1,
            "rank " + sourceRank + " row " + i + " ." + field.name());
      }
      i++;
    }
    assertEquals(expected.size(), i);
  }

  /** Checks a column vector directly, value by value, for rows [0, n). */
  public static void assertColumn(
      DataType t, List<InternalRow> expected, int ordinal, ColumnVector v) {
    for (int i = 0; i < expected.size(); i++) {
      assertValue(
          t,
          expected.get(i),
          ordinal,
          new org.apache.spark.sql.vectorized.ColumnarArray(v, 0, expected.size()),
          i,
          "row " + i);
    }
  }

  public static void assertValue(
      DataType t, SpecializedGetters e, int ei, SpecializedGetters a, int ai, String path) {
    boolean en = e.isNullAt(ei);
    assertEquals(en, a.isNullAt(ai), path + " null");
    if (en || t instanceof NullType) {
      return;
    }
    if (t instanceof BooleanType) {
      assertEquals(e.getBoolean(ei), a.getBoolean(ai), path);
    } else if (t instanceof ByteType) {
      assertEquals(e.getByte(ei), a.getByte(ai), path);
    } else if (t instanceof ShortType) {
      assertEquals(e.getShort(ei), a.getShort(ai), path);
    } else if (t instanceof IntegerType
        || t instanceof DateType
        || t instanceof YearMonthIntervalType) {
      assertEquals(e.getInt(ei), a.getInt(ai), path);
    } else if (t instanceof LongType
        || t instanceof TimestampType
        || t instanceof TimestampNTZType
        || t instanceof DayTimeIntervalType) {
      assertEquals(e.getLong(ei), a.getLong(ai), path);
    } else if (t instanceof FloatType) {
      assertEquals(
          Float.floatToIntBits(e.getFloat(ei)), Float.floatToIntBits(a.getFloat(ai)), path);
    } else if (t instanceof DoubleType) {
      assertEquals(
          Double.doubleToLongBits(e.getDouble(ei)), Double.doubleToLongBits(a.getDouble(ai)), path);
    } else if (t instanceof DecimalType) {
      DecimalType d = (DecimalType) t;
      assertEquals(
          e.getDecimal(ei, d.precision(), d.scale()).toJavaBigDecimal(),
          a.getDecimal(ai, d.precision(), d.scale()).toJavaBigDecimal(),
          path);
    } else if (t instanceof StringType) {
      assertEquals(e.getUTF8String(ei), a.getUTF8String(ai), path);
    } else if (t instanceof BinaryType) {
      assertArrayEquals(e.getBinary(ei), a.getBinary(ai), path);
    } else if (t instanceof CalendarIntervalType) {
      assertEquals(e.getInterval(ei), a.getInterval(ai), path);
    } else if (t instanceof TimeType) {
      assertEquals(e.getLong(ei), a.getLong(ai), path);
    } else if (t instanceof VariantType) {
      assertArrayEquals(e.getVariant(ei).getValue(), a.getVariant(ai).getValue(), path + " value");
      assertArrayEquals(
          e.getVariant(ei).getMetadata(), a.getVariant(ai).getMetadata(), path + " metadata");
    } else if (t instanceof ArrayType) {
      assertArray(((ArrayType) t).elementType(), e.getArray(ei), a.getArray(ai), path);
    } else if (t instanceof MapType) {
      MapType m = (MapType) t;
      MapData em = e.getMap(ei);
      MapData am = a.getMap(ai);
      assertEquals(em.numElements(), am.numElements(), path + " map size");
      assertArray(m.keyType(), em.keyArray(), am.keyArray(), path + " keys");
      assertArray(m.valueType(), em.valueArray(), am.valueArray(), path + " values");
    } else if (t instanceof StructType) {
      StructType s = (StructType) t;
      int n = s.fields().length;
      InternalRow er = e.getStruct(ei, n);
      InternalRow ar = a.getStruct(ai, n);
      for (int f = 0; f < n; f++) {
        assertValue(s.fields()[f].dataType(), er, f, ar, f, path + "." + s.fields()[f].name());
      }
    } else {
      fail("no comparer for " + t);
    }
  }

  private static void assertArray(DataType elem, ArrayData e, ArrayData a, String path) {
    assertEquals(e.numElements(), a.numElements(), path + " length");
    for (int i = 0; i < e.numElements(); i++) {
      assertValue(elem, e, i, a, i, path + "[" + i + "]");
    }
  }

  // ------------------------------------------------------------------ Spark's own vectors

  /** {@code rows} as one batch of Spark's on-heap column vectors. */
  public static ColumnarBatch onHeapBatch(StructType schema, List<InternalRow> rows) {
    return sparkBatch(schema, rows, false);
  }

  /** {@code rows} as one batch of Spark's on-heap or off-heap column vectors. */
  public static ColumnarBatch sparkBatch(
      StructType schema, List<InternalRow> rows, boolean offHeap) {
    WritableColumnVector[] cols =
        offHeap
            ? org.apache.spark.sql.execution.vectorized.OffHeapColumnVector.allocateColumns(
                Math.max(rows.size(), 1), schema)
            : OnHeapColumnVector.allocateColumns(Math.max(rows.size(), 1), schema);
    for (InternalRow row : rows) {
      for (int f = 0; f < cols.length; f++) {
        append(cols[f], schema.fields()[f].dataType(), row, f);
      }
    }
    return new ColumnarBatch(cols, rows.size());
  }

  private static void append(WritableColumnVector v, DataType t, SpecializedGetters src, int i) {
    if (src.isNullAt(i)) {
      if (t instanceof StructType) {
        v.appendStruct(true);
      } else {
        v.appendNull();
      }
      return;
    }
    if (t instanceof BooleanType) {
      v.appendBoolean(src.getBoolean(i));
    } else if (t instanceof ByteType) {
      v.appendByte(src.getByte(i));
    } else if (t instanceof ShortType) {
      v.appendShort(src.getShort(i));
    } else if (t instanceof IntegerType || t instanceof DateType) {
      v.appendInt(src.getInt(i));
    } else if (t instanceof LongType
        || t instanceof TimestampType
        || t instanceof TimestampNTZType) {
      v.appendLong(src.getLong(i));
    } else if (t instanceof FloatType) {
      v.appendFloat(src.getFloat(i));
    } else if (t instanceof DoubleType) {
      v.appendDouble(src.getDouble(i));
    } else if (t instanceof DecimalType) {
      DecimalType d = (DecimalType) t;
      int id = v.appendNotNull();
      v.putDecimal(id, src.getDecimal(i, d.precision(), d.scale()), d.precision());
    } else if (t instanceof StringType) {
      byte[] b = src.getUTF8String(i).getBytes();
      v.appendByteArray(b, 0, b.length);
    } else if (t instanceof BinaryType) {
      byte[] b = src.getBinary(i);
      v.appendByteArray(b, 0, b.length);
    } else if (t instanceof ArrayType) {
      ArrayData a = src.getArray(i);
      v.appendArray(a.numElements());
      for (int k = 0; k < a.numElements(); k++) {
        append(v.arrayData(), ((ArrayType) t).elementType(), a, k);
      }
    } else if (t instanceof MapType) {
      MapData m = src.getMap(i);
      v.appendArray(m.numElements());
      for (int k = 0; k < m.numElements(); k++) {
        append((WritableColumnVector) v.getChild(0), ((MapType) t).keyType(), m.keyArray(), k);
        append((WritableColumnVector) v.getChild(1), ((MapType) t).valueType(), m.valueArray(), k);
      }
    } else if (t instanceof StructType) {
      StructType s = (StructType) t;
      v.appendStruct(false);
      InternalRow r = src.getStruct(i, s.fields().length);
      for (int f = 0; f < s.fields().length; f++) {
        append((WritableColumnVector) v.getChild(f), s.fields()[f].dataType(), r, f);
      }
    } else {
      throw new IllegalArgumentException("no on-heap writer for " + t);
    }
  }

  public static StructType struct(StructField... fields) {
    return new StructType(fields);
  }

  public static StructField field(String name, DataType t) {
    return DataTypes.createStructField(name, t, true);
  }

  public static StructField notNull(String name, DataType t) {
    return DataTypes.createStructField(name, t, false);
  }
}
