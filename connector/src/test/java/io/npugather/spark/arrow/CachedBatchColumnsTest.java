package io.npugather.spark.arrow;

import static io.npugather.spark.arrow.ArrowTestSupport.TZ;
import static io.npugather.spark.arrow.ArrowTestSupport.field;
import static io.npugather.spark.arrow.ArrowTestSupport.notNull;
import static io.npugather.spark.arrow.ArrowTestSupport.randomRows;
import static io.npugather.spark.arrow.ArrowTestSupport.struct;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.RootAllocator;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.columnar.CachedBatch;
import org.apache.spark.sql.execution.columnar.ColumnBuilder;
import org.apache.spark.sql.execution.columnar.ColumnBuilder$;
import org.apache.spark.sql.execution.columnar.DefaultCachedBatch;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;

class CachedBatchColumnsTest extends WithRootAllocator {
  static final StructType SCHEMA =
      struct(
          field("flag", DataTypes.BooleanType),
          field("b", DataTypes.ByteType),
          field("s", DataTypes.ShortType),
          field("i", DataTypes.IntegerType),
          field("l", DataTypes.LongType),
          field("f", DataTypes.FloatType),
          field("d", DataTypes.DoubleType),
          notNull("f_nn", DataTypes.FloatType),
          notNull("d_nn", DataTypes.DoubleType),
          notNull("runs", DataTypes.IntegerType),
          notNull("few", DataTypes.LongType),
          notNull("ascending", DataTypes.LongType));

  /** Random rows, with columns that Spark's cache compresses (runs, few values, small deltas). */
  private static List<InternalRow> rows(int n, Random rnd, double nullP, long start) {
    List<InternalRow> rows = randomRows(SCHEMA, n, rnd, nullP);
    for (int r = 0; r < n; r++) {
      GenericInternalRow g = (GenericInternalRow) rows.get(r);
      long id = start + r;
      g.update(9, (int) (id / 50));
      g.update(10, (long) (id % 3) * 1_000_000_007L);
      g.update(11, id * 3);
    }
    return rows;
  }

  /** One batch as Spark's default cache serializer stores it (compression on). */
  private static DefaultCachedBatch cachedBatch(List<InternalRow> rows, int[] order) {
    byte[][] buffers = new byte[order.length][];
    for (int k = 0; k < order.length; k++) {
      int c = order[k];
      ColumnBuilder b =
          ColumnBuilder$.MODULE$.apply(SCHEMA.fields()[c].dataType(), 16, SCHEMA.fields()[c].name(), true);
      for (InternalRow r : rows) {
        b.appendFrom(r, c);
      }
      ByteBuffer built = b.build();
      buffers[k] = new byte[built.remaining()];
      built.get(buffers[k]);
    }
    return new DefaultCachedBatch(rows.size(), buffers, new GenericInternalRow(0));
  }

  private static void assertSameBlock(PartitionBuffers expected, PartitionBuffers actual, RootAllocator a) {
    assertEquals(expected.layout(), actual.layout());
    long n = expected.layout().blockBytes();
    try (ArrowBuf e = a.buffer(Math.max(8, n));
        ArrowBuf g = a.buffer(Math.max(8, n))) {
      expected.copyBlockTo(e.memoryAddress());
      actual.copyBlockTo(g.memoryAddress());
      for (long k = 0; k < n; k++) {
        if (e.getByte(k) != g.getByte(k)) {
          throw new AssertionError("blocks differ at byte " + k + " of " + n);
        }
      }
    }
  }

  @Test
  void cachedBatchesGiveTheSameBlockAsTheRowsByteForByte() {
    Random rnd = new Random(41);
    // Buffers stored in reverse order: the column indices map fields to buffers.
    int[] order = new int[SCHEMA.fields().length];
    int[] columns = new int[order.length];
    for (int k = 0; k < order.length; k++) {
      order[k] = order.length - 1 - k;
      columns[order.length - 1 - k] = k;
    }
    int[][] shapes = {{}, {0}, {1}, {7, 0, 300}, {1000, 1000, 17}};
    for (int[] sizes : shapes) {
      for (double nullP : new double[] {0.0, 0.2}) {
        List<InternalRow> all = new ArrayList<>();
        List<CachedBatch> batches = new ArrayList<>();
        for (int n : sizes) {
          List<InternalRow> part = rows(n, rnd, nullP, all.size());
          all.addAll(part);
          batches.add(cachedBatch(part, order));
        }
        try (PartitionBuffers viaRows = PartitionBuffers.fromRows(all.iterator(), SCHEMA, TZ, root);
            PartitionBuffers cached =
                PartitionBuffers.fromCachedBatches(batches.iterator(), columns, SCHEMA, TZ, root)) {
          assertSameBlock(viaRows, cached, root);
          ArrowTestSupport.assertBatch(SCHEMA, all, cached.ownBatch(1), 1);
        }
      }
    }
  }

  @Test
  void onlyTheTypesSparkReadsFromItsCacheAsColumnsAreTaken() {
    assertTrue(PartitionBuffers.supportsCachedBatches(SCHEMA));
    StructType dated = struct(field("d", DataTypes.DateType));
    assertFalse(PartitionBuffers.supportsCachedBatches(dated));
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class,
            () ->
                PartitionBuffers.fromCachedBatches(
                    new ArrayList<CachedBatch>().iterator(), new int[] {0}, dated, TZ, root));
    assertTrue(e.getMessage().contains("allowed: boolean"), e.getMessage());
  }
}
