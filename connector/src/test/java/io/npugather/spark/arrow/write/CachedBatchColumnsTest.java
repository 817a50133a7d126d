package io.npugather.spark.arrow.write;

import static io.npugather.spark.arrow.ArrowTestSupport.TZ;
import static io.npugather.spark.arrow.ArrowTestSupport.field;
import static io.npugather.spark.arrow.ArrowTestSupport.notNull;
import static io.npugather.spark.arrow.ArrowTestSupport.randomRows;
import static io.npugather.spark.arrow.ArrowTestSupport.struct;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.block.LocalBlock;
import io.npugather.spark.arrow.ArrowTestSupport;
import io.npugather.spark.arrow.WithRootAllocator;
import io.npugather.spark.arrow.read.OwnBatches;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.RootAllocator;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.columnar.CachedBatch;
import org.apache.spark.sql.execution.columnar.ColumnBuilder;
import org.apache.spark.sql.execution.columnar.ColumnBuilder$;
import org.apache.spark.sql.execution.columnar.DefaultCachedBatch;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.Platform;
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

  /** One batch of {@code schema} as Spark's default cache serializer stores it (compression on). */
  private static DefaultCachedBatch cachedBatch(
      StructType schema, List<InternalRow> rows, int[] order) {
    byte[][] buffers = new byte[order.length][];
    for (int k = 0; k < order.length; k++) {
      int c = order[k];
      ColumnBuilder b =
          ColumnBuilder$.MODULE$.apply(
              schema.fields()[c].dataType(), 16, schema.fields()[c].name(), true);
      for (InternalRow r : rows) {
        b.appendFrom(r, c);
      }
      ByteBuffer built = b.build();
      buffers[k] = new byte[built.remaining()];
      built.get(buffers[k]);
    }
    return new DefaultCachedBatch(rows.size(), buffers, new GenericInternalRow(0));
  }

  private static void assertSameBlock(LocalBlock expected, LocalBlock actual, RootAllocator a) {
    assertEquals(expected.layout(), actual.layout());
    long n = expected.layout().blockBytes();
    try (ArrowBuf e = a.buffer(Math.max(8, n));
        ArrowBuf g = a.buffer(Math.max(8, n))) {
      expected.copyTo(e.memoryAddress());
      actual.copyTo(g.memoryAddress());
      for (long k = 0; k < n; k++) {
        if (e.getByte(k) != g.getByte(k)) {
          throw new AssertionError("blocks differ at byte " + k + " of " + n);
        }
      }
    }
  }

  /** Random rows of a partition, the first at {@code start}. */
  private interface RowSource {
    List<InternalRow> rows(int n, Random rnd, double nullP, long start);
  }

  /**
   * For partitions of several batch shapes (none, empty batches, one row, several batches) with and
   * without nulls, cached with their buffers in reverse order (the column indices map fields to
   * buffers): the same block as the rows give, the same buffers as Spark's ArrowWriter, and every
   * value.
   */
  private void assertCachedLikeRows(StructType schema, Random rnd, RowSource source) {
    assertCachedLikeRows(
        schema, rnd, source, new int[][] {{}, {0}, {1}, {7, 0, 300}, {1000, 1000, 17}});
  }

  private void assertCachedLikeRows(
      StructType schema, Random rnd, RowSource source, int[][] shapes) {
    int[] order = new int[schema.fields().length];
    int[] columns = new int[order.length];
    for (int k = 0; k < order.length; k++) {
      order[k] = order.length - 1 - k;
      columns[order.length - 1 - k] = k;
    }
    for (int[] sizes : shapes) {
      for (double nullP : new double[] {0.0, 0.2}) {
        List<InternalRow> all = new ArrayList<>();
        List<CachedBatch> batches = new ArrayList<>();
        for (int n : sizes) {
          List<InternalRow> part = source.rows(n, rnd, nullP, all.size());
          all.addAll(part);
          batches.add(cachedBatch(schema, part, order));
        }
        String what = java.util.Arrays.toString(sizes) + " rows, null fraction " + nullP;
        try (LocalBlock viaRows = PartitionWriter.fromRows(all.iterator(), schema, TZ, root);
            LocalBlock cached =
                PartitionWriter.fromCachedBatches(batches.iterator(), columns, schema, TZ, root)) {
          assertSameBlock(viaRows, cached, root);
          ArrowTestSupport.assertSameBuffersAsSpark(schema, all, cached.root(), root, what);
          ArrowTestSupport.assertBatch(schema, all, OwnBatches.of(cached, schema, 1), 1);
        }
      }
    }
  }

  @Test
  void cachedBatchesGiveTheSameBlockAsTheRowsByteForByte() {
    assertCachedLikeRows(SCHEMA, new Random(41), CachedBatchColumnsTest::rows);
  }

  /**
   * Every array type read from the cache, nullable and not, with or without null elements; a long
   * one whose null bitsets span several words; and a primitive column between them.
   */
  static StructType arraySchema() {
    List<StructField> f = new ArrayList<>();
    for (DataType t : ArrowTestSupport.FIXED) {
      f.add(field("a_" + t.typeName(), DataTypes.createArrayType(t, true)));
      f.add(notNull("a_" + t.typeName() + "_nn", DataTypes.createArrayType(t, false)));
    }
    f.add(field("id", DataTypes.LongType));
    f.add(field("long", DataTypes.createArrayType(DataTypes.FloatType, true)));
    return new StructType(f.toArray(new StructField[0]));
  }

  private static List<InternalRow> arrayRows(StructType schema, int n, Random rnd, double nullP) {
    List<InternalRow> rows = randomRows(schema, n, rnd, nullP);
    int longArrays = schema.fields().length - 1;
    for (InternalRow r : rows) {
      if (!r.isNullAt(longArrays)) {
        Object[] elems = new Object[rnd.nextInt(150)];
        for (int i = 0; i < elems.length; i++) {
          elems[i] = rnd.nextDouble() < nullP ? null : (float) rnd.nextGaussian();
        }
        ((GenericInternalRow) r).update(longArrays, new GenericArrayData(elems));
      }
    }
    return ArrowTestSupport.unsafe(schema, rows);
  }

  @Test
  void cachedArrayColumnsGiveTheSameBuffersAsTheRowsAndAsSparkByteForByte() {
    StructType schema = arraySchema();
    assertTrue(PartitionWriter.supportsCachedBatches(schema));
    assertCachedLikeRows(
        schema, new Random(43), (n, rnd, nullP, start) -> arrayRows(schema, n, rnd, nullP));
  }

  /**
   * Feature vectors whose elements pass 4 MiB: the element values are allocated untouched (not
   * zeroed) and written once, the rest as usual; the same bytes.
   */
  @Test
  void largeCachedArrayColumnsGiveTheSameBuffersAsTheRows() {
    StructType schema =
        struct(
            field("id", DataTypes.LongType),
            field("features", DataTypes.createArrayType(DataTypes.FloatType, true)),
            field("ints", DataTypes.createArrayType(DataTypes.IntegerType, false)));
    RowSource source =
        (n, rnd, nullP, start) -> {
          List<InternalRow> rows = randomRows(schema, n, rnd, nullP);
          for (InternalRow r : rows) {
            if (!r.isNullAt(1)) {
              Object[] elems = new Object[rnd.nextInt(400)];
              for (int i = 0; i < elems.length; i++) {
                elems[i] = rnd.nextDouble() < nullP ? null : (float) rnd.nextGaussian();
              }
              ((GenericInternalRow) r).update(1, new GenericArrayData(elems));
            }
          }
          return ArrowTestSupport.unsafe(schema, rows);
        };
    // About 7,000 rows x 200 floats: 5.6 MB of element values.
    assertCachedLikeRows(schema, new Random(47), source, new int[][] {{4000, 3000}});
  }

  /**
   * The element vector is sized from the first array: arrays longer than it (the vector grows,
   * across batches too) and shorter ones (sized by the cached bytes instead) give the same bytes.
   */
  @Test
  void arraysOfOtherLengthsThanTheFirstGiveTheSameBuffersAsTheRows() {
    StructType schema =
        struct(
            field("id", DataTypes.LongType),
            field("v", DataTypes.createArrayType(DataTypes.DoubleType, true)));
    for (int[] lengths : new int[][] {{1, 300}, {300, 0}, {0, 40}, {2, 2000}}) {
      RowSource source =
          (n, rnd, nullP, start) -> {
            List<InternalRow> rows = randomRows(schema, n, rnd, nullP);
            for (int i = 0; i < rows.size(); i++) {
              InternalRow r = rows.get(i);
              if (!r.isNullAt(1)) {
                Object[] elems = new Object[start + i == 0 ? lengths[0] : lengths[1]];
                for (int e = 0; e < elems.length; e++) {
                  elems[e] = rnd.nextDouble() < nullP ? null : rnd.nextGaussian();
                }
                ((GenericInternalRow) r).update(1, new GenericArrayData(elems));
              }
            }
            return ArrowTestSupport.unsafe(schema, rows);
          };
      assertCachedLikeRows(schema, new Random(lengths[1]), source, new int[][] {{1, 500, 900}});
    }
  }

  @Test
  void aCachedArrayColumnWhoseBytesDoNotAddUpIsRefused() {
    StructType schema = struct(field("v", DataTypes.createArrayType(DataTypes.FloatType, true)));
    DefaultCachedBatch good =
        cachedBatch(schema, arrayRows(schema, 5, new Random(1), 0.0), new int[] {0});
    byte[] bytes = good.buffers()[0];
    byte[] truncated = java.util.Arrays.copyOf(bytes, bytes.length - 4);
    // An array claiming more elements than its bytes hold (the first array's count, after the
    // null count and its length).
    byte[] overlong = bytes.clone();
    Platform.putLong(overlong, Platform.BYTE_ARRAY_OFFSET + 4 + 4, 1L << 20);
    // Truncated inside an array; one row more than arrays; more bytes than arrays.
    DefaultCachedBatch[] bad = {
      new DefaultCachedBatch(5, new byte[][] {overlong}, new GenericInternalRow(0)),
      new DefaultCachedBatch(5, new byte[][] {truncated}, new GenericInternalRow(0)),
      new DefaultCachedBatch(6, new byte[][] {bytes}, new GenericInternalRow(0)),
      new DefaultCachedBatch(4, new byte[][] {bytes}, new GenericInternalRow(0))
    };
    for (DefaultCachedBatch b : bad) {
      List<CachedBatch> batches = new ArrayList<>();
      batches.add(b);
      IllegalArgumentException e =
          assertThrows(
              IllegalArgumentException.class,
              () ->
                  PartitionWriter.fromCachedBatches(
                      batches.iterator(), new int[] {0}, schema, TZ, root));
      assertTrue(e.getMessage().contains("uncompressed array column layout"), e.getMessage());
    }
  }

  @Test
  void onlyTheTypesSparkReadsFromItsCacheAsColumnsAreTaken() {
    assertTrue(PartitionWriter.supportsCachedBatches(SCHEMA));
    StructType dated = struct(field("d", DataTypes.DateType));
    assertFalse(PartitionWriter.supportsCachedBatches(dated));
    assertFalse(
        PartitionWriter.supportsCachedBatches(
            struct(field("s", DataTypes.createArrayType(DataTypes.StringType)))));
    assertFalse(
        PartitionWriter.supportsCachedBatches(
            struct(
                field(
                    "n",
                    DataTypes.createArrayType(DataTypes.createArrayType(DataTypes.FloatType))))));
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class,
            () ->
                PartitionWriter.fromCachedBatches(
                    new ArrayList<CachedBatch>().iterator(), new int[] {0}, dated, TZ, root));
    assertTrue(e.getMessage().contains("allowed: boolean"), e.getMessage());
  }
}
