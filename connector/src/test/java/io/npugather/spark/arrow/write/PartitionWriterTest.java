package io.npugather.spark.arrow.write;

import static io.npugather.spark.arrow.ArrowTestSupport.TZ;
import static io.npugather.spark.arrow.ArrowTestSupport.assertBatch;
import static io.npugather.spark.arrow.ArrowTestSupport.field;
import static io.npugather.spark.arrow.ArrowTestSupport.notNull;
import static io.npugather.spark.arrow.ArrowTestSupport.randomRows;
import static io.npugather.spark.arrow.ArrowTestSupport.struct;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.block.LocalBlock;
import io.npugather.spark.arrow.ArrowTestSupport;
import io.npugather.spark.arrow.WithRootAllocator;
import io.npugather.spark.arrow.read.OwnBatches;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.junit.jupiter.api.Test;

public class PartitionWriterTest extends WithRootAllocator {

  public static final StructType SCHEMA =
      struct(
          field("bool", DataTypes.BooleanType),
          field("byte", DataTypes.ByteType),
          field("short", DataTypes.ShortType),
          field("int", DataTypes.IntegerType),
          notNull("int_nn", DataTypes.IntegerType),
          field("long", DataTypes.LongType),
          field("float", DataTypes.FloatType),
          field("double", DataTypes.DoubleType),
          field("date", DataTypes.DateType),
          field("ts_ntz", DataTypes.TimestampNTZType),
          field("dec", new DecimalType(38, 18)),
          field("str", DataTypes.StringType),
          field("ts", DataTypes.TimestampType),
          field("features", DataTypes.createArrayType(DataTypes.FloatType, true)),
          field("m", DataTypes.createMapType(DataTypes.StringType, DataTypes.IntegerType, true)),
          field(
              "s",
              struct(
                  field("a", DataTypes.IntegerType),
                  field("l", DataTypes.createArrayType(DataTypes.StringType, true)))));

  /** A batch of ArrowColumnVectors over Arrow vectors written from {@code rows}. */
  private static ColumnarBatch arrowBatch(LocalBlock p) {
    List<FieldVector> vs = p.root().getFieldVectors();
    ColumnVector[] cols = new ColumnVector[vs.size()];
    for (int i = 0; i < cols.length; i++) {
      cols[i] = new ArrowColumnVector(vs.get(i));
    }
    return new ColumnarBatch(cols, p.root().getRowCount());
  }

  @Test
  void arrowAndSparkBatchesInAnyMixConcatenateInOrder() {
    Random rnd = new Random(21);
    BufferAllocator src = root.newChildAllocator("src", 0, Long.MAX_VALUE);
    List<InternalRow> all = new ArrayList<>();
    List<ColumnarBatch> batches = new ArrayList<>();
    List<LocalBlock> sources = new ArrayList<>();
    // kind: a = Arrow batch of the same types (buffer-wise append), h = on-heap, e = empty,
    // n = Arrow batch whose types differ in nullability (value-wise), o = off-heap,
    // z = off-heap without any null (single memory copies for primitives).
    String[] orders = {"aahae", "haan", "nnha", "e", "ohzoz", "zzzz", "azoh"};
    try {
      for (String order : orders) {
        all.clear();
        batches.clear();
        for (char kind : order.toCharArray()) {
          int n = kind == 'e' ? 0 : 1 + rnd.nextInt(300);
          List<InternalRow> rows = randomRows(SCHEMA, n, rnd, kind == 'z' ? 0.0 : 0.2);
          all.addAll(rows);
          if (kind == 'a' || kind == 'e') {
            LocalBlock p = PartitionWriter.fromRows(rows.iterator(), SCHEMA, TZ, src);
            sources.add(p);
            batches.add(arrowBatch(p));
          } else if (kind == 'n') {
            StructType nonNull = struct(notNull("bool", DataTypes.BooleanType));
            // Only the first column differs; the generator must then not produce nulls in it.
            List<InternalRow> fixed = new ArrayList<>();
            for (InternalRow r : rows) {
              org.apache.spark.sql.catalyst.expressions.GenericInternalRow g =
                  (org.apache.spark.sql.catalyst.expressions.GenericInternalRow) r;
              if (g.isNullAt(0)) {
                g.update(0, Boolean.TRUE);
              }
              fixed.add(g);
            }
            StructType mixed = nonNull;
            for (int f = 1; f < SCHEMA.fields().length; f++) {
              mixed = mixed.add(SCHEMA.fields()[f]);
            }
            LocalBlock p = PartitionWriter.fromRows(fixed.iterator(), mixed, TZ, src);
            sources.add(p);
            batches.add(arrowBatch(p));
          } else {
            batches.add(ArrowTestSupport.sparkBatch(SCHEMA, rows, kind == 'o' || kind == 'z'));
          }
        }
        try (LocalBlock p = PartitionWriter.fromBatches(batches.iterator(), SCHEMA, TZ, root)) {
          assertEquals(all.size(), p.layout().rowCount(), order);
          assertBatch(SCHEMA, all, OwnBatches.of(p, SCHEMA, 3), 3);
          // The same vectors a row-wise conversion gives, byte for byte in layout.
          try (LocalBlock viaRows = PartitionWriter.fromRows(all.iterator(), SCHEMA, TZ, root)) {
            assertEquals(viaRows.layout().schemaFingerprint(), p.layout().schemaFingerprint());
            assertEquals(viaRows.layout().nodeCount(), p.layout().nodeCount());
            for (int i = 0; i < p.layout().nodeCount(); i++) {
              assertEquals(
                  viaRows.layout().nodeLength(i), p.layout().nodeLength(i), order + " node " + i);
              assertEquals(
                  viaRows.layout().nodeNullCount(i),
                  p.layout().nodeNullCount(i),
                  order + " node " + i);
            }
          }
        } finally {
          for (ColumnarBatch b : batches) {
            if (!(b.column(0) instanceof ArrowColumnVector)) {
              b.close();
            }
          }
          for (LocalBlock s : sources) {
            s.close();
          }
          sources.clear();
        }
      }
    } finally {
      for (LocalBlock s : sources) {
        s.close();
      }
      src.close();
    }
  }

  /**
   * Array columns of every fixed-width element type from Spark's on-heap and off-heap vectors (the
   * Parquet reader's), with null arrays and null elements, over several batches: the same buffers
   * as Spark's ArrowWriter, byte for byte, and every value.
   */
  @Test
  void arrayColumnsOfSparkBatchesGiveTheSameBuffersAsSparkByteForByte() {
    StructType schema = CachedBatchColumnsTest.arraySchema();
    Random rnd = new Random(29);
    for (boolean offHeap : new boolean[] {false, true}) {
      for (double nullP : new double[] {0.0, 0.2}) {
        List<InternalRow> all = new ArrayList<>();
        List<ColumnarBatch> batches = new ArrayList<>();
        try {
          for (int n : new int[] {1, 0, 200, 57}) {
            List<InternalRow> rows = randomRows(schema, n, rnd, nullP);
            all.addAll(rows);
            batches.add(ArrowTestSupport.sparkBatch(schema, rows, offHeap));
          }
          String what = (offHeap ? "off" : "on") + " heap, null fraction " + nullP;
          try (LocalBlock p = PartitionWriter.fromBatches(batches.iterator(), schema, TZ, root)) {
            ArrowTestSupport.assertSameBuffersAsSpark(schema, all, p.root(), root, what);
            assertBatch(schema, all, OwnBatches.of(p, schema, 1), 1);
          }
        } finally {
          batches.forEach(ColumnarBatch::close);
        }
      }
    }
  }

  /** Arrays that do not lie back to back in the element vector are copied one by one. */
  @Test
  void arraysOutOfOrderInTheirElementVectorAreCopiedOneByOne() {
    StructType schema = struct(field("v", DataTypes.createArrayType(DataTypes.FloatType, true)));
    Random rnd = new Random(31);
    int n = 300;
    List<InternalRow> rows = new ArrayList<>();
    OnHeapColumnVector column =
        new OnHeapColumnVector(n, DataTypes.createArrayType(DataTypes.FloatType, true));
    WritableColumnVector data = column.arrayData();
    int[] lengths = new int[n];
    int total = 0;
    for (int i = 0; i < n; i++) {
      lengths[i] = rnd.nextInt(100);
      total += lengths[i];
    }
    data.reserve(total);
    // Row i's elements are placed after those of rows i+1 .. n-1: last row first.
    int at = total;
    for (int i = 0; i < n; i++) {
      at -= lengths[i];
      Object[] elems = new Object[lengths[i]];
      for (int j = 0; j < lengths[i]; j++) {
        if (rnd.nextInt(10) == 0) {
          data.putNull(at + j);
        } else {
          float f = (float) rnd.nextGaussian();
          data.putFloat(at + j, f);
          elems[j] = f;
        }
      }
      if (rnd.nextInt(10) == 0) {
        column.putNull(i);
        rows.add(new GenericInternalRow(new Object[] {null}));
      } else {
        column.putArray(i, at, lengths[i]);
        rows.add(new GenericInternalRow(new Object[] {new GenericArrayData(elems)}));
      }
    }
    try (ColumnarBatch batch = new ColumnarBatch(new ColumnVector[] {column}, n);
        LocalBlock p = PartitionWriter.fromBatches(List.of(batch).iterator(), schema, TZ, root)) {
      ArrowTestSupport.assertSameBuffersAsSpark(schema, rows, p.root(), root, "out of order");
      assertBatch(schema, rows, OwnBatches.of(p, schema, 1), 1);
    }
  }

  @Test
  void constantColumnsAreExpanded() {
    StructType s = struct(field("c", DataTypes.LongType), field("t", DataTypes.StringType));
    ConstantColumnVector c = new ConstantColumnVector(7, DataTypes.LongType);
    c.setLong(42L);
    ConstantColumnVector t = new ConstantColumnVector(7, DataTypes.StringType);
    t.setNull();
    ColumnarBatch b = new ColumnarBatch(new ColumnVector[] {c, t}, 7);
    List<InternalRow> expected = new ArrayList<>();
    for (int i = 0; i < 7; i++) {
      expected.add(
          new org.apache.spark.sql.catalyst.expressions.GenericInternalRow(
              new Object[] {42L, null}));
    }
    try (LocalBlock p = PartitionWriter.fromBatches(List.of(b).iterator(), s, TZ, root)) {
      assertBatch(s, expected, OwnBatches.of(p, s, 0), 0);
    }
  }

  @Test
  void batchWithTheWrongColumnCountIsRejected() {
    StructType s = struct(field("a", DataTypes.LongType), field("b", DataTypes.LongType));
    ColumnarBatch b =
        ArrowTestSupport.onHeapBatch(
            struct(field("a", DataTypes.LongType)),
            randomRows(struct(field("a", DataTypes.LongType)), 3, new Random(1), 0.2));
    try {
      IllegalArgumentException e =
          assertThrows(
              IllegalArgumentException.class,
              () -> PartitionWriter.fromBatches(List.of(b).iterator(), s, TZ, root));
      assertTrue(e.getMessage().contains("1 column(s)"), e.getMessage());
    } finally {
      b.close();
    }
  }
}
