package io.npugather.spark.arrow.read;

import static io.npugather.spark.arrow.ArrowTestSupport.TZ;
import static io.npugather.spark.arrow.ArrowTestSupport.field;
import static io.npugather.spark.arrow.ArrowTestSupport.randomRows;
import static io.npugather.spark.arrow.ArrowTestSupport.struct;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.block.LocalBlock;
import io.npugather.spark.arrow.ArrowTestSupport;
import io.npugather.spark.arrow.WithRootAllocator;
import io.npugather.spark.arrow.write.PartitionWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.Random;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.junit.jupiter.api.Test;

class GatheredRowsTest extends WithRootAllocator {
  /**
   * Rank r's partition holds {@code counts[r]} random rows; the rows of every rank's batch, in rank
   * order, must be byte for byte what Spark's UnsafeProjection makes of the same batches.
   */
  private void assertSameAsSparkProjection(
      StructType schema, int[] counts, double nullP, long seed, int chunkRows, int chunkBytes) {
    Random rnd = new Random(seed);
    List<LocalBlock> parts = new ArrayList<>();
    try {
      List<ColumnarBatch> batches = new ArrayList<>();
      for (int r = 0; r < counts.length; r++) {
        List<InternalRow> rows = randomRows(schema, counts[r], rnd, nullP);
        LocalBlock p = PartitionWriter.fromRows(rows.iterator(), schema, TZ, root);
        parts.add(p);
        batches.add(GatheredPartitions.batch(r, p.root(), schema));
      }
      StructType output = withSourceRank(schema);
      UnsafeProjection spark = UnsafeProjection.create(output);
      GatheredRows actual = new GatheredRows(batches.iterator(), schema, chunkRows, chunkBytes);
      String run =
          counts.length
              + " ranks of "
              + java.util.Arrays.toString(counts)
              + " rows, nulls "
              + nullP
              + ", chunks of "
              + chunkRows
              + " rows / "
              + chunkBytes
              + " B";
      for (int r = 0; r < counts.length; r++) {
        ColumnarBatch b = batches.get(r);
        for (int i = 0; i < b.numRows(); i++) {
          String at = run + ": rank " + r + " row " + i;
          assertTrue(actual.hasNext(), at);
          UnsafeRow got = (UnsafeRow) actual.next();
          assertEquals(r, got.getInt(0), at);
          assertEquals(spark.apply(b.getRow(i)), got, at);
        }
      }
      assertFalse(actual.hasNext(), run);
      assertThrows(NoSuchElementException.class, actual::next, run);
    } finally {
      parts.forEach(LocalBlock::close);
    }
  }

  @Test
  void everyDirectTypeMatchesSparksProjection() {
    StructType schema = ArrowTestSupport.directSchema();
    long seed = 41;
    for (double nullP : new double[] {0.0, 0.3}) {
      assertSameAsSparkProjection(
          schema,
          new int[] {700, 0, 1, 9},
          nullP,
          seed++,
          GatheredRows.CHUNK_ROWS,
          GatheredRows.CHUNK_BYTES);
      // Chunks end mid-batch, by rows and by bytes.
      assertSameAsSparkProjection(schema, new int[] {50, 3, 0, 64}, nullP, seed++, 7, 1 << 20);
      assertSameAsSparkProjection(schema, new int[] {50, 3, 0, 64}, nullP, seed++, 4096, 2000);
    }
    assertSameAsSparkProjection(schema, new int[] {0, 0}, 0.3, seed, 7, 2000);
  }

  @Test
  void featureVectorsLargerThanAChunk() {
    StructType schema =
        struct(
            field("id", DataTypes.LongType),
            field("features", DataTypes.createArrayType(DataTypes.FloatType, false)));
    Random rnd = new Random(43);
    List<InternalRow> rows = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      Object[] v = new Object[i == 7 ? 3000 : 64 + i];
      for (int k = 0; k < v.length; k++) {
        v[k] = rnd.nextFloat();
      }
      rows.add(new GenericInternalRow(new Object[] {rnd.nextLong(), new GenericArrayData(v)}));
    }
    try (LocalBlock p = PartitionWriter.fromRows(rows.iterator(), schema, TZ, root)) {
      ColumnarBatch b = GatheredPartitions.batch(1, p.root(), schema);
      UnsafeProjection spark = UnsafeProjection.create(withSourceRank(schema));
      GatheredRows actual = new GatheredRows(List.of(b).iterator(), schema, 4096, 1024);
      for (int i = 0; i < rows.size(); i++) {
        assertEquals(spark.apply(b.getRow(i)), actual.next(), "row " + i);
      }
      assertFalse(actual.hasNext());
    }
  }

  @Test
  void refusesColumnsItDoesNotWrite() {
    StructType schema = struct(field("s", DataTypes.StringType), field("x", DataTypes.IntegerType));
    assertFalse(GatheredRows.supports(schema));
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class,
            () -> new GatheredRows(List.<ColumnarBatch>of().iterator(), schema));
    assertTrue(e.getMessage().contains("string"), e.getMessage());
    assertTrue(GatheredRows.supports(ArrowTestSupport.directSchema()));
  }

  /** What the gather's rows are: the int source rank, never null, then the columns. */
  private static StructType withSourceRank(StructType columns) {
    StructType out = new StructType().add("source_rank", DataTypes.IntegerType, false);
    for (var field : columns.fields()) {
      out = out.add(field);
    }
    return out;
  }
}
