package io.npugather.spark.arrow.read;

import static io.npugather.spark.arrow.ArrowTestSupport.TZ;
import static io.npugather.spark.arrow.ArrowTestSupport.allGatherV;
import static io.npugather.spark.arrow.ArrowTestSupport.assertBatch;
import static io.npugather.spark.arrow.ArrowTestSupport.field;
import static io.npugather.spark.arrow.ArrowTestSupport.notNull;
import static io.npugather.spark.arrow.ArrowTestSupport.randomRows;
import static io.npugather.spark.arrow.ArrowTestSupport.sparkArrowSchema;
import static io.npugather.spark.arrow.ArrowTestSupport.struct;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.NpuGatherException;
import io.npugather.ResultCode;
import io.npugather.block.BlockLayout;
import io.npugather.block.LocalBlock;
import io.npugather.block.SchemaFingerprint;
import io.npugather.block.TestBlocks;
import io.npugather.spark.arrow.ArrowTestSupport;
import io.npugather.spark.arrow.WithRootAllocator;
import io.npugather.spark.arrow.write.PartitionWriter;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.junit.jupiter.api.Test;

public class GatheredPartitionsTest extends WithRootAllocator {

  public static final StructType ALL_TYPES =
      struct(
          field("bool", DataTypes.BooleanType),
          field("byte", DataTypes.ByteType),
          field("short", DataTypes.ShortType),
          field("int", DataTypes.IntegerType),
          notNull("int_nn", DataTypes.IntegerType),
          field("long", DataTypes.LongType),
          field("float", DataTypes.FloatType),
          field("double", DataTypes.DoubleType),
          field("dec_small", new DecimalType(10, 2)),
          field("dec_big", new DecimalType(38, 18)),
          field("str", DataTypes.StringType),
          notNull("str_nn", DataTypes.StringType),
          field("bin", DataTypes.BinaryType),
          field("date", DataTypes.DateType),
          field("ts", DataTypes.TimestampType),
          field("ts_ntz", DataTypes.TimestampNTZType),
          field("interval", DataTypes.CalendarIntervalType),
          field("ym", DataTypes.createYearMonthIntervalType()),
          field("dt", DataTypes.createDayTimeIntervalType()),
          field("nothing", DataTypes.NullType),
          field("time", new org.apache.spark.sql.types.TimeType(6)),
          field("variant", DataTypes.VariantType),
          field("features", DataTypes.createArrayType(DataTypes.FloatType, true)),
          field("features_nn", DataTypes.createArrayType(DataTypes.FloatType, false)),
          field("strs", DataTypes.createArrayType(DataTypes.StringType, true)),
          field("m", DataTypes.createMapType(DataTypes.StringType, DataTypes.LongType, true)),
          field(
              "s",
              struct(
                  field("a", DataTypes.IntegerType),
                  field("b", DataTypes.StringType),
                  field("c", struct(field("d", DataTypes.DoubleType))))));

  static final StructType NESTED =
      struct(
          field("id", DataTypes.LongType),
          field(
              "n",
              struct(
                  field(
                      "l",
                      DataTypes.createArrayType(
                          DataTypes.createMapType(
                              DataTypes.StringType, DataTypes.IntegerType, true),
                          true)))),
          field(
              "deep",
              DataTypes.createArrayType(
                  struct(
                      field(
                          "k",
                          DataTypes.createMapType(
                              DataTypes.IntegerType,
                              DataTypes.createArrayType(DataTypes.DoubleType, true),
                              true)),
                      field("v", DataTypes.BinaryType)),
                  true)));

  /** Builds every rank from rows, simulates the collective, checks every rank's view. */
  private void roundTrip(StructType schema, int[] rowsPerRank, long seed, boolean viaBatches) {
    roundTrip(schema, rowsPerRank, seed, viaBatches, false);
  }

  /** {@code paddingSegments}: every buffer's padding is a segment of its own. */
  private void roundTrip(
      StructType schema,
      int[] rowsPerRank,
      long seed,
      boolean viaBatches,
      boolean paddingSegments) {
    Random rnd = new Random(seed);
    int n = rowsPerRank.length;
    List<List<InternalRow>> input = new ArrayList<>();
    List<BufferAllocator> taskAllocators = new ArrayList<>();
    List<LocalBlock> parts = new ArrayList<>();
    List<BlockLayout> layouts = new ArrayList<>();
    try {
      for (int r = 0; r < n; r++) {
        List<InternalRow> rows = randomRows(schema, rowsPerRank[r], rnd, 0.2);
        input.add(rows);
        BufferAllocator a = root.newChildAllocator("task-" + r, 0, Long.MAX_VALUE);
        taskAllocators.add(a);
        LocalBlock p;
        if (viaBatches) {
          ColumnarBatch b = ArrowTestSupport.onHeapBatch(schema, rows);
          try {
            p = PartitionWriter.fromBatches(Collections.singletonList(b).iterator(), schema, TZ, a);
          } finally {
            b.close();
          }
        } else {
          p = PartitionWriter.fromRows(rows.iterator(), schema, TZ, a);
        }
        if (paddingSegments) {
          p = TestBlocks.withPaddingSegments(p, a);
        }
        parts.add(p);
        assertEquals(rowsPerRank[r], p.layout().rowCount());
        // What the metadata exchange carries.
        layouts.add(BlockLayout.fromBytes(p.layout().toBytes()));
      }
      long[] displs = ArrowTestSupport.displacements(layouts);
      for (int own = 0; own < n; own++) {
        BufferAllocator comm = root.newChildAllocator("comm-" + own, 0, Long.MAX_VALUE);
        BufferAllocator out = root.newChildAllocator("out-" + own, 0, Long.MAX_VALUE);
        GatheredPartitions g;
        try (ArrowBuf recv = allGatherV(parts, displs, own, comm)) {
          g = GatheredPartitions.wrap(recv, layouts, displs, own, parts.get(own), schema, out);
        }
        // The caller's reference to recv is gone: the gathered vectors keep it alive.
        try (GatheredPartitions gathered = g) {
          assertEquals(n, gathered.numRanks());
          for (int r = 0; r < n; r++) {
            assertBatch(schema, input.get(r), gathered.batch(r), r);
          }
        }
        assertEquals(0, out.getAllocatedMemory());
        out.close();
        assertEquals(0, comm.getAllocatedMemory());
        comm.close();
      }
    } finally {
      for (LocalBlock p : parts) {
        p.close();
      }
      for (BufferAllocator a : taskAllocators) {
        assertEquals(0, a.getAllocatedMemory(), a.getName());
        a.close();
      }
    }
  }

  @Test
  void everySupportedTypeWithNullsSurvivesTheGather() {
    roundTrip(ALL_TYPES, new int[] {257, 1, 1000}, 1L, false);
  }

  @Test
  void separatePaddingSegmentsSurviveTheGather() {
    roundTrip(ALL_TYPES, new int[] {13, 0, 101}, 23L, false, true);
  }

  @Test
  void floatFeatureVectorsSurviveTheGather() {
    StructType schema =
        struct(
            notNull("id", DataTypes.LongType),
            field("features", DataTypes.createArrayType(DataTypes.FloatType, true)));
    roundTrip(schema, new int[] {500, 300, 700, 1}, 2L, false);
  }

  @Test
  void nestedStructOfArrayOfMapSurvivesTheGather() {
    roundTrip(NESTED, new int[] {300, 200, 100}, 3L, false);
  }

  @Test
  void emptyPartitionsSurviveTheGather() {
    roundTrip(ALL_TYPES, new int[] {0, 0, 0}, 4L, false);
    roundTrip(NESTED, new int[] {0, 17, 0}, 5L, false);
  }

  @Test
  void skewedPartitionsSurviveTheGather() {
    StructType schema =
        struct(
            field("i", DataTypes.IntegerType),
            field("s", DataTypes.StringType),
            field("f", DataTypes.createArrayType(DataTypes.FloatType, true)));
    roundTrip(schema, new int[] {0, 100_000, 3}, 6L, false);
  }

  @Test
  void columnarBatchesFromSparkVectorsSurviveTheGather() {
    StructType schema =
        struct(
            field("bool", DataTypes.BooleanType),
            field("int", DataTypes.IntegerType),
            field("long", DataTypes.LongType),
            field("float", DataTypes.FloatType),
            field("double", DataTypes.DoubleType),
            field("dec_small", new DecimalType(10, 2)),
            field("dec_big", new DecimalType(38, 18)),
            field("str", DataTypes.StringType),
            field("bin", DataTypes.BinaryType),
            field("date", DataTypes.DateType),
            field("ts", DataTypes.TimestampType),
            field("features", DataTypes.createArrayType(DataTypes.FloatType, true)),
            field("m", DataTypes.createMapType(DataTypes.StringType, DataTypes.IntegerType, true)),
            field(
                "s", struct(field("a", DataTypes.IntegerType), field("b", DataTypes.StringType))));
    roundTrip(schema, new int[] {400, 0, 123}, 7L, true);
  }

  @Test
  void mismatchedSchemaFingerprintIsAClearError() {
    StructType a = struct(field("x", DataTypes.IntegerType));
    StructType b = struct(field("x", DataTypes.LongType));
    try (LocalBlock pa =
            PartitionWriter.fromRows(
                randomRows(a, 10, new Random(8), 0.2).iterator(), a, TZ, root);
        LocalBlock pb =
            PartitionWriter.fromRows(
                randomRows(b, 10, new Random(9), 0.2).iterator(), b, TZ, root)) {
      List<BlockLayout> layouts = List.of(pa.layout(), pb.layout());
      long[] displs = ArrowTestSupport.displacements(layouts);
      try (ArrowBuf recv = allGatherV(List.of(pa, pb), displs, 0, root)) {
        NpuGatherException e =
            assertThrows(
                NpuGatherException.class,
                () -> GatheredPartitions.wrap(recv, layouts, displs, 0, pa, a, root));
        assertEquals(ResultCode.INVALID_USAGE, e.code());
        assertEquals(0, e.rank());
        assertTrue(e.getMessage().contains("schema mismatch: rank 1"), e.getMessage());
        assertEquals(1, recv.refCnt(), "no reference leaked on failure");
      }
    }
  }

  @Test
  void nullabilityAndTimeZoneChangeTheFingerprint() {
    StructType a = struct(field("x", DataTypes.IntegerType));
    StructType b = struct(notNull("x", DataTypes.IntegerType));
    StructType t = struct(field("t", DataTypes.TimestampType));
    StructType nested1 = struct(field("s", struct(field("y", DataTypes.IntegerType))));
    StructType nested2 = struct(field("s", struct(notNull("y", DataTypes.IntegerType))));
    long fa = SchemaFingerprint.of(sparkArrowSchema(a, TZ));
    assertEquals(fa, SchemaFingerprint.of(sparkArrowSchema(a, TZ)));
    assertFalse(fa == SchemaFingerprint.of(sparkArrowSchema(b, TZ)));
    assertFalse(
        SchemaFingerprint.of(sparkArrowSchema(t, "UTC"))
            == SchemaFingerprint.of(sparkArrowSchema(t, TZ)));
    assertFalse(
        SchemaFingerprint.of(sparkArrowSchema(nested1, TZ))
            == SchemaFingerprint.of(sparkArrowSchema(nested2, TZ)));
  }

  @Test
  void blockThatDoesNotFitTheReceiveBufferIsAClearError() {
    StructType s = struct(field("x", DataTypes.LongType), field("y", DataTypes.StringType));
    try (LocalBlock p0 =
            PartitionWriter.fromRows(
                randomRows(s, 10, new Random(10), 0.2).iterator(), s, TZ, root);
        LocalBlock p1 =
            PartitionWriter.fromRows(
                randomRows(s, 10, new Random(11), 0.2).iterator(), s, TZ, root)) {
      List<BlockLayout> layouts = List.of(p0.layout(), p1.layout());
      long[] displs = ArrowTestSupport.displacements(layouts);
      try (ArrowBuf big = root.buffer(1 << 16);
          ArrowBuf small = big.slice(0, p1.layout().blockBytes() - 8)) {
        small.getReferenceManager().retain();
        IllegalStateException e =
            assertThrows(
                IllegalStateException.class,
                () -> GatheredPartitions.wrap(small, layouts, new long[] {0, 0}, 0, p0, s, root));
        assertTrue(e.getMessage().contains("does not fit"), e.getMessage());
      }
      IllegalStateException e =
          assertThrows(
              IllegalStateException.class,
              () -> GatheredPartitions.wrap(null, layouts, displs, 0, p0, s, root));
      assertTrue(e.getMessage().contains("does not fit"), e.getMessage());
      try (ArrowBuf recv = allGatherV(List.of(p0, p1), displs, 0, root)) {
        IllegalStateException m =
            assertThrows(
                IllegalStateException.class,
                () -> GatheredPartitions.wrap(recv, layouts, new long[] {0, 4}, 0, p0, s, root));
        assertTrue(m.getMessage().contains("multiple of 8"), m.getMessage());
      }
    }
  }

  @Test
  void layoutThatDoesNotMatchTheSchemaStructureIsRejected() {
    StructType s = struct(field("x", DataTypes.LongType));
    try (LocalBlock p0 =
        PartitionWriter.fromRows(randomRows(s, 5, new Random(12), 0.2).iterator(), s, TZ, root)) {
      BlockLayout l = p0.layout();
      BlockLayout forged =
          new BlockLayout(
              l.schemaFingerprint(),
              5,
              new long[] {5, 5},
              new long[] {0, 0},
              new long[] {8, 40},
              new long[0]);
      BlockLayout wrongRows =
          new BlockLayout(
              l.schemaFingerprint(),
              6,
              new long[] {5},
              new long[] {0},
              new long[] {8, 40},
              new long[0]);
      try (ArrowBuf recv = root.buffer(1024)) {
        assertEquals(
            ResultCode.REMOTE_ERROR,
            assertThrows(
                    NpuGatherException.class,
                    () ->
                        GatheredPartitions.wrap(
                            recv, List.of(l, forged), new long[] {0, 0}, 0, p0, s, root))
                .code());
        assertEquals(
            ResultCode.REMOTE_ERROR,
            assertThrows(
                    NpuGatherException.class,
                    () ->
                        GatheredPartitions.wrap(
                            recv, List.of(l, wrongRows), new long[] {0, 0}, 0, p0, s, root))
                .code());
      }
    }
  }

  @Test
  void blockInconsistentWithItsLayoutIsAClearError() {
    StructType s = struct(field("x", DataTypes.LongType), field("y", DataTypes.StringType));
    try (LocalBlock p0 =
            PartitionWriter.fromRows(
                randomRows(s, 10, new Random(19), 0.2).iterator(), s, TZ, root);
        LocalBlock p1 =
            PartitionWriter.fromRows(
                randomRows(s, 10, new Random(20), 0.2).iterator(), s, TZ, root)) {
      BlockLayout l1 = p1.layout();
      // x's data buffer claimed shorter than 10 longs.
      long[] nodes = new long[l1.nodeCount()];
      long[] nulls = new long[l1.nodeCount()];
      for (int i = 0; i < nodes.length; i++) {
        nodes[i] = l1.nodeLength(i);
        nulls[i] = l1.nodeNullCount(i);
      }
      long[] bufs = new long[l1.bufferCount()];
      for (int i = 0; i < bufs.length; i++) {
        bufs[i] = l1.bufferLength(i);
      }
      bufs[1] = 72;
      BlockLayout shortData =
          new BlockLayout(l1.schemaFingerprint(), 10, nodes, nulls, bufs, new long[0]);
      try (ArrowBuf recv = root.buffer(4096)) {
        recv.setZero(0, recv.capacity());
        NpuGatherException e =
            assertThrows(
                NpuGatherException.class,
                () ->
                    GatheredPartitions.wrap(
                        recv, List.of(p0.layout(), shortData), new long[] {0, 0}, 0, p0, s, root));
        assertEquals(ResultCode.REMOTE_ERROR, e.code());
        assertTrue(
            e.getMessage().contains("column x data buffer of 72 bytes, 80 needed"), e.getMessage());
      }
      // y's last offset pointing past its data.
      List<BlockLayout> layouts = List.of(p0.layout(), l1);
      long[] displs = ArrowTestSupport.displacements(layouts);
      try (ArrowBuf recv = allGatherV(List.of(p0, p1), displs, 0, root)) {
        recv.setInt(displs[1] + l1.bufferOffset(3) + 10 * 4, 1 << 20);
        NpuGatherException e =
            assertThrows(
                NpuGatherException.class,
                () -> GatheredPartitions.wrap(recv, layouts, displs, 0, p0, s, root));
        assertEquals(ResultCode.REMOTE_ERROR, e.code());
        assertTrue(e.getMessage().contains("column y data buffer of"), e.getMessage());
        assertEquals(1, recv.refCnt());
      }
    }
  }

  @Test
  void singleRankNeedsNoReceiveBuffer() {
    StructType s = struct(field("x", DataTypes.LongType));
    List<InternalRow> rows = randomRows(s, 50, new Random(13), 0.2);
    try (LocalBlock p = PartitionWriter.fromRows(rows.iterator(), s, TZ, root);
        GatheredPartitions g =
            GatheredPartitions.wrap(null, List.of(p.layout()), new long[] {0}, 0, p, s, root)) {
      assertBatch(s, rows, g.batch(0), 0);
      assertEquals(50, g.totalRows());
    }
  }

  @Test
  void ownBatchServesTheInputVectorsWithoutCopy() {
    StructType s =
        struct(
            field("x", DataTypes.LongType),
            field("f", DataTypes.createArrayType(DataTypes.FloatType)));
    List<InternalRow> rows = randomRows(s, 100, new Random(14), 0.2);
    try (LocalBlock p = PartitionWriter.fromRows(rows.iterator(), s, TZ, root)) {
      long before = root.getAllocatedMemory();
      ColumnarBatch b = GatheredPartitions.batch(5, p.root(), s);
      assertEquals(before, root.getAllocatedMemory());
      assertBatch(s, rows, b, 5);
      assertTrue(((FixedWidthArrowColumn) b.column(1)).getValueVector() == p.root().getVector(0));
    }
  }

  @Test
  void gatheredVectorsShareTheReceiveBufferMemory() {
    StructType s = struct(field("x", DataTypes.LongType), field("y", DataTypes.StringType));
    try (LocalBlock p0 =
            PartitionWriter.fromRows(
                randomRows(s, 1000, new Random(15), 0.2).iterator(), s, TZ, root);
        LocalBlock p1 =
            PartitionWriter.fromRows(
                randomRows(s, 1000, new Random(16), 0.2).iterator(), s, TZ, root)) {
      List<BlockLayout> layouts = List.of(p0.layout(), p1.layout());
      long[] displs = ArrowTestSupport.displacements(layouts);
      BufferAllocator comm = root.newChildAllocator("comm", 0, Long.MAX_VALUE);
      BufferAllocator out = root.newChildAllocator("out", 0, Long.MAX_VALUE);
      try (ArrowBuf recv = allGatherV(List.of(p0, p1), displs, 0, comm);
          GatheredPartitions g = GatheredPartitions.wrap(recv, layouts, displs, 0, p0, s, out)) {
        org.apache.arrow.vector.BigIntVector x =
            (org.apache.arrow.vector.BigIntVector)
                ((FixedWidthArrowColumn) g.batch(1).column(1)).getValueVector();
        long data = x.getDataBuffer().memoryAddress();
        assertTrue(
            data >= recv.memoryAddress() + displs[1] && data < recv.memoryAddress() + displs[2]);
        assertEquals(0, data % 8, "buffers are 8-byte aligned");
        // Only the bitmaps Arrow synthesizes for null-free vectors could count here; none needed.
        assertEquals(0, out.getAllocatedMemory());
      } finally {
        out.close();
        comm.close();
      }
    }
  }

  @Test
  void allocatorIsAtZeroAfterEverythingIsClosed() {
    BufferAllocator task = root.newChildAllocator("task", 0, Long.MAX_VALUE);
    LocalBlock p =
        PartitionWriter.fromRows(
            randomRows(ALL_TYPES, 300, new Random(17), 0.2).iterator(), ALL_TYPES, TZ, task);
    assertTrue(task.getAllocatedMemory() > 0);
    ColumnarBatch own = GatheredPartitions.batch(0, p.root(), ALL_TYPES);
    own.close(); // a consumer closing the batch early must not break close()
    p.close();
    p.close(); // idempotent
    assertEquals(0, task.getAllocatedMemory());
    task.close();
  }

  @Test
  void failedConversionReleasesEverything() {
    BufferAllocator task = root.newChildAllocator("task", 0, Long.MAX_VALUE);
    StructType s = struct(field("x", DataTypes.LongType));
    List<InternalRow> rows = randomRows(s, 100, new Random(18), 0.2);
    java.util.Iterator<InternalRow> failing =
        new java.util.Iterator<>() {
          int i;

          @Override
          public boolean hasNext() {
            return true;
          }

          @Override
          public InternalRow next() {
            if (i == 50) {
              throw new IllegalStateException("upstream failure");
            }
            return rows.get(i++);
          }
        };
    assertThrows(IllegalStateException.class, () -> PartitionWriter.fromRows(failing, s, TZ, task));
    assertEquals(0, task.getAllocatedMemory());
    task.close();
  }
}
