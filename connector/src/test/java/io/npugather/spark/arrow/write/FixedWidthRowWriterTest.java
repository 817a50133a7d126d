package io.npugather.spark.arrow.write;

import static io.npugather.spark.arrow.ArrowTestSupport.TZ;
import static io.npugather.spark.arrow.ArrowTestSupport.notNull;
import static io.npugather.spark.arrow.ArrowTestSupport.randomRows;
import static io.npugather.spark.arrow.ArrowTestSupport.struct;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.block.LocalBlock;
import io.npugather.spark.arrow.ArrowTestSupport;
import io.npugather.spark.arrow.FixedWidthType;
import io.npugather.spark.arrow.WithRootAllocator;
import java.util.List;
import java.util.Random;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;

class FixedWidthRowWriterTest extends WithRootAllocator {
  private void assertSameBuffersAsSpark(StructType schema, List<InternalRow> rows, int expected) {
    try (LocalBlock p = PartitionWriter.fromRows(rows.iterator(), schema, TZ, root, expected)) {
      ArrowTestSupport.assertSameBuffersAsSpark(
          schema, rows, p.root(), root, rows.size() + " rows, expected " + expected);
    }
  }

  @Test
  void everyDirectTypeWithNullsGivesSparksArrowWriterBuffersByteForByte() {
    StructType schema = ArrowTestSupport.directSchema();
    Random rnd = new Random(7);
    for (int n : new int[] {0, 1, 7, 8, 9, 1000}) {
      List<InternalRow> generic = randomRows(schema, n, rnd, 0.25);
      List<InternalRow> rows = ArrowTestSupport.unsafe(schema, generic);
      // Exact count, unknown count (grows), an underestimate (grows), an overestimate.
      for (int expected : new int[] {n, -1, n / 3, 2 * n + 5}) {
        assertSameBuffersAsSpark(schema, rows, expected);
      }
      // Rows that are not UnsafeRows take the getter path.
      assertSameBuffersAsSpark(schema, generic, n);
    }
  }

  @Test
  void directColumnsBetweenFieldWriterColumnsGiveTheSameBuffers() {
    StructType schema = ArrowTestSupport.mixedSchema();
    Random rnd = new Random(8);
    for (int n : new int[] {0, 3, 500}) {
      List<InternalRow> generic = randomRows(schema, n, rnd, 0.2);
      assertSameBuffersAsSpark(schema, ArrowTestSupport.unsafe(schema, generic), -1);
      assertSameBuffersAsSpark(schema, ArrowTestSupport.unsafe(schema, generic), n);
      assertSameBuffersAsSpark(schema, generic, n);
    }
  }

  @Test
  void stringsAndBinariesWithNullsAndEmptyValuesGiveSparksBuffers() {
    StructType schema =
        struct(
            ArrowTestSupport.field("s", DataTypes.StringType),
            notNull("s_nn", DataTypes.StringType),
            ArrowTestSupport.field("b", DataTypes.BinaryType),
            notNull("b_nn", DataTypes.BinaryType),
            notNull("id", DataTypes.LongType));
    Random rnd = new Random(10);
    for (int n : new int[] {0, 1, 9, 1000, FixedWidthRowWriter.UNKNOWN_COUNT_CAPACITY * 2 + 3}) {
      List<InternalRow> generic = randomRows(schema, n, rnd, 0.25);
      List<InternalRow> rows = ArrowTestSupport.unsafe(schema, generic);
      for (int expected : new int[] {n, -1, n / 3, 2 * n + 5}) {
        assertSameBuffersAsSpark(schema, rows, expected);
      }
      assertSameBuffersAsSpark(schema, generic, n);
    }
  }

  @Test
  void manyRowsBeyondTheUnknownCountCapacityWithoutNulls() {
    StructType schema =
        struct(
            notNull("id", DataTypes.LongType),
            notNull("x", DataTypes.FloatType),
            notNull("v", DataTypes.createArrayType(DataTypes.FloatType, false)));
    int n = FixedWidthRowWriter.UNKNOWN_COUNT_CAPACITY * 2 + 3;
    List<InternalRow> rows =
        ArrowTestSupport.unsafe(schema, randomRows(schema, n, new Random(9), 0.0));
    assertSameBuffersAsSpark(schema, rows, -1);
    assertSameBuffersAsSpark(schema, rows, n);
  }

  @Test
  void typesWrittenDirectly() {
    for (DataType t : ArrowTestSupport.FIXED) {
      assertTrue(FixedWidthType.isFixedWidthColumn(t), t.simpleString());
      assertTrue(FixedWidthType.isFixedWidthColumn(DataTypes.createArrayType(t)), t.simpleString());
    }
    assertFalse(FixedWidthType.isFixedWidthColumn(DataTypes.StringType));
    assertFalse(FixedWidthType.isFixedWidthColumn(new DecimalType(10, 2)));
    assertFalse(
        FixedWidthType.isFixedWidthColumn(
            DataTypes.createArrayType(DataTypes.createArrayType(DataTypes.FloatType))));
  }
}
