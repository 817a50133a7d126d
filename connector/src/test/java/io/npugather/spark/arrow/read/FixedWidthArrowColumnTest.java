package io.npugather.spark.arrow.read;

import static io.npugather.spark.arrow.ArrowTestSupport.TZ;
import static io.npugather.spark.arrow.ArrowTestSupport.assertBatch;
import static io.npugather.spark.arrow.ArrowTestSupport.randomRows;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.block.LocalBlock;
import io.npugather.spark.arrow.ArrowTestSupport;
import io.npugather.spark.arrow.FixedWidthType;
import io.npugather.spark.arrow.WithRootAllocator;
import io.npugather.spark.arrow.write.PartitionWriter;
import java.util.List;
import java.util.Random;
import org.apache.arrow.vector.FieldVector;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.junit.jupiter.api.Test;

class FixedWidthArrowColumnTest extends WithRootAllocator {
  /** Every getter of {@code a} against Spark's ArrowColumnVector {@code e} over the same vector. */
  private static void assertSameAsArrowColumnVector(
      DataType t, ColumnVector e, ColumnVector a, int n, String path) {
    assertEquals(e.hasNull(), a.hasNull(), path);
    assertEquals(e.numNulls(), a.numNulls(), path);
    for (int i = 0; i < n; i++) {
      String at = path + " row " + i;
      assertEquals(e.isNullAt(i), a.isNullAt(i), at);
      if (e.isNullAt(i)) {
        continue;
      }
      if (t instanceof ArrayType) {
        ColumnarArray ea = e.getArray(i);
        ColumnarArray aa = a.getArray(i);
        assertEquals(ea.numElements(), aa.numElements(), at);
        DataType el = ((ArrayType) t).elementType();
        for (int k = 0; k < ea.numElements(); k++) {
          assertEquals(ea.isNullAt(k), aa.isNullAt(k), at + "[" + k + "]");
          if (!ea.isNullAt(k)) {
            assertEquals(value(el, ea, k), value(el, aa, k), at + "[" + k + "]");
          }
        }
        if (el instanceof FloatType && !hasNull(ea)) {
          assertArrayEquals(ea.toFloatArray(), aa.toFloatArray(), at);
        }
      } else {
        assertEquals(value(t, e, i), value(t, a, i), at);
      }
    }
    if (!(t instanceof ArrayType) && !(t instanceof BooleanType) && n > 2 && !e.hasNull()) {
      // Bulk getters (Arrow's accessors refuse null slots).
      if (t instanceof FloatType) {
        assertArrayEquals(e.getFloats(1, n - 1), a.getFloats(1, n - 1), path);
      } else if (t instanceof DoubleType) {
        assertArrayEquals(e.getDoubles(1, n - 1), a.getDoubles(1, n - 1), path);
      } else if (t instanceof ByteType) {
        assertArrayEquals(e.getBytes(1, n - 1), a.getBytes(1, n - 1), path);
      } else if (t instanceof ShortType) {
        assertArrayEquals(e.getShorts(1, n - 1), a.getShorts(1, n - 1), path);
      } else if (FixedWidthType.of(t).width() == 4) {
        assertArrayEquals(e.getInts(1, n - 1), a.getInts(1, n - 1), path);
      } else {
        assertArrayEquals(e.getLongs(1, n - 1), a.getLongs(1, n - 1), path);
      }
    }
  }

  private static boolean hasNull(ColumnarArray a) {
    for (int k = 0; k < a.numElements(); k++) {
      if (a.isNullAt(k)) {
        return true;
      }
    }
    return false;
  }

  /** The value as raw bits (NaN payloads included). */
  private static long value(
      DataType t, org.apache.spark.sql.catalyst.expressions.SpecializedGetters g, int i) {
    if (t instanceof BooleanType) {
      return g.getBoolean(i) ? 1 : 0;
    } else if (t instanceof ByteType) {
      return g.getByte(i);
    } else if (t instanceof ShortType) {
      return g.getShort(i);
    } else if (t instanceof FloatType) {
      return Float.floatToRawIntBits(g.getFloat(i));
    } else if (t instanceof DoubleType) {
      return Double.doubleToRawLongBits(g.getDouble(i));
    } else if (FixedWidthType.of(t).width() == 4) {
      return g.getInt(i);
    }
    return g.getLong(i);
  }

  private static long value(DataType t, ColumnVector v, int i) {
    return value(t, new ColumnarArray(v, 0, i + 1), i);
  }

  @Test
  void everyGetterReadsWhatArrowColumnVectorReads() {
    StructType schema = ArrowTestSupport.directSchema();
    Random rnd = new Random(31);
    for (int n : new int[] {0, 1, 9, 700}) {
      for (double nullP : new double[] {0.0, 0.3}) {
        List<InternalRow> rows = randomRows(schema, n, rnd, nullP);
        try (LocalBlock p = PartitionWriter.fromRows(rows.iterator(), schema, TZ, root)) {
          List<FieldVector> vs = p.root().getFieldVectors();
          for (int c = 0; c < vs.size(); c++) {
            DataType t = schema.fields()[c].dataType();
            ColumnVector a = FixedWidthArrowColumn.of(t, vs.get(c));
            assertEquals(FixedWidthArrowColumn.class, a.getClass());
            // Not closed: closing an ArrowColumnVector closes the vector.
            ArrowColumnVector e = new ArrowColumnVector(vs.get(c));
            assertSameAsArrowColumnVector(
                t, e, a, n, schema.fields()[c].name() + " (" + n + " rows)");
          }
          ColumnarBatch own = GatheredPartitions.batch(2, p.root(), schema);
          assertBatch(schema, rows, own, 2);
          String[] classes = GatheredPartitions.columnClassNames(schema);
          for (int c = 0; c < own.numCols(); c++) {
            assertEquals(classes[c], own.column(c).getClass().getName(), "column " + c);
          }
        }
      }
    }
  }

  @Test
  void otherTypesKeepSparksArrowColumnVectorWhichClosingLeavesOpen() {
    StructType schema = ArrowTestSupport.mixedSchema();
    List<InternalRow> rows = randomRows(schema, 50, new Random(32), 0.2);
    try (LocalBlock p = PartitionWriter.fromRows(rows.iterator(), schema, TZ, root)) {
      ColumnarBatch own = GatheredPartitions.batch(0, p.root(), schema);
      String[] classes = GatheredPartitions.columnClassNames(schema);
      for (int c = 0; c < own.numCols(); c++) {
        assertEquals(classes[c], own.column(c).getClass().getName(), "column " + c);
      }
      assertEquals(SharedArrowColumn.class.getName(), classes[1]);
      assertTrue(own.column(1) instanceof ArrowColumnVector);
      assertEquals(FixedWidthArrowColumn.class.getName(), classes[2]);
      // Spark's columnar-to-row code closes each batch it has read; a later reader still reads.
      own.closeIfFreeable();
      own.close();
      assertBatch(schema, rows, GatheredPartitions.batch(0, p.root(), schema), 0);
    }
  }
}
