package io.npugather.bench;

import io.npugather.block.BlockLayout;
import io.npugather.block.LocalBlock;
import io.npugather.block.ReceiveDisplacements;
import io.npugather.spark.arrow.read.GatheredPartitions;
import io.npugather.spark.arrow.write.PartitionWriter;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.columnar.CachedBatch;
import org.apache.spark.sql.execution.columnar.ColumnAccessor$;
import org.apache.spark.sql.execution.columnar.ColumnBuilder;
import org.apache.spark.sql.execution.columnar.ColumnBuilder$;
import org.apache.spark.sql.execution.columnar.DefaultCachedBatch;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.Platform;

/**
 * Conversion throughput for 1M rows of 16 float + 1 long columns (or {@code args[0]} rows): rows to
 * Arrow, a cached DataFrame's batches to Arrow (through Spark's on-heap decoding, and straight from
 * the cached bytes), columnar batches to Arrow (Arrow and on-heap sources), and rebuilding gathered
 * vectors over a receive buffer, plus a full scan of the gathered batches. Reports the median and
 * the range over the iterations after one warm-up.
 *
 * <p>Command and figures: docs/performance/2026-12-conversion.md.
 */
public final class ConversionThroughput {
  private ConversionThroughput() {}

  static final int FLOATS = 16;

  static StructType schema() {
    StructField[] f = new StructField[FLOATS + 1];
    f[0] = DataTypes.createStructField("id", DataTypes.LongType, false);
    for (int i = 0; i < FLOATS; i++) {
      f[i + 1] = DataTypes.createStructField("f" + i, DataTypes.FloatType, true);
    }
    return new StructType(f);
  }

  /** UnsafeRows produced on the fly into one reused row, as a Spark scan hands them out. */
  static Iterator<InternalRow> rows(int n) {
    int bytes = UnsafeRow.calculateBitSetWidthInBytes(FLOATS + 1) + 8 * (FLOATS + 1);
    byte[] buf = new byte[bytes];
    UnsafeRow row = new UnsafeRow(FLOATS + 1);
    row.pointTo(buf, Platform.BYTE_ARRAY_OFFSET, bytes);
    return new Iterator<>() {
      int i;

      @Override
      public boolean hasNext() {
        return i < n;
      }

      @Override
      public InternalRow next() {
        row.setLong(0, i);
        for (int k = 1; k <= FLOATS; k++) {
          row.setFloat(k, i * 0.5f + k);
        }
        i++;
        return row;
      }
    };
  }

  static double mb(long bytes) {
    return bytes / 1e6;
  }

  /** The rows of {@link #rows} as Spark's default cache stores them: batches of 10,000 rows. */
  static List<CachedBatch> cachedBatches(int n, StructType schema) {
    List<CachedBatch> out = new ArrayList<>();
    Iterator<InternalRow> it = rows(n);
    for (int start = 0; start < n; start += CACHE_BATCH_ROWS) {
      int rows = Math.min(CACHE_BATCH_ROWS, n - start);
      ColumnBuilder[] builders = new ColumnBuilder[schema.fields().length];
      for (int c = 0; c < builders.length; c++) {
        builders[c] =
            ColumnBuilder$.MODULE$.apply(
                schema.fields()[c].dataType(), rows, schema.fields()[c].name(), true);
      }
      for (int r = 0; r < rows; r++) {
        InternalRow row = it.next();
        for (int c = 0; c < builders.length; c++) {
          builders[c].appendFrom(row, c);
        }
      }
      byte[][] buffers = new byte[builders.length][];
      for (int c = 0; c < builders.length; c++) {
        java.nio.ByteBuffer b = builders[c].build();
        buffers[c] = new byte[b.remaining()];
        b.get(buffers[c]);
      }
      out.add(new DefaultCachedBatch(rows, buffers, new GenericInternalRow(0)));
    }
    return out;
  }

  static final int CACHE_BATCH_ROWS = 10_000;

  /** What Spark's columnar cache reader does per batch: fresh on-heap vectors, then decoding. */
  static Iterator<ColumnarBatch> sparkDecoded(List<CachedBatch> cache, StructType schema) {
    Iterator<CachedBatch> it = cache.iterator();
    return new Iterator<>() {
      @Override
      public boolean hasNext() {
        return it.hasNext();
      }

      @Override
      public ColumnarBatch next() {
        DefaultCachedBatch b = (DefaultCachedBatch) it.next();
        OnHeapColumnVector[] cols = OnHeapColumnVector.allocateColumns(b.numRows(), schema);
        for (int c = 0; c < cols.length; c++) {
          ColumnAccessor$.MODULE$.decompress(
              b.buffers()[c], cols[c], schema.fields()[c].dataType(), b.numRows());
        }
        return new ColumnarBatch(cols, b.numRows());
      }
    };
  }

  /** Timings of one measured step over the iterations. */
  static final class Samples {
    final String what;
    final long rows;
    final long bytes;
    final List<Long> nanos = new ArrayList<>();

    Samples(String what, long rows, long bytes) {
      this.what = what;
      this.rows = rows;
      this.bytes = bytes;
    }

    void add(long t0, long t1) {
      nanos.add(t1 - t0);
    }

    void report() {
      if (nanos.isEmpty()) {
        return;
      }
      List<Long> sorted = new ArrayList<>(nanos);
      sorted.sort(null);
      long median = sorted.get(sorted.size() / 2);
      double s = median / 1e9;
      System.out.printf(
          "%-50s %8.1f ms (%6.1f-%6.1f)  %7.2f M rows/s  %8.1f MB/s%n",
          what,
          s * 1e3,
          sorted.get(0) / 1e6,
          sorted.get(sorted.size() - 1) / 1e6,
          rows / s / 1e6,
          mb(bytes) / s);
    }
  }

  public static void main(String[] args) {
    int n = args.length > 0 ? Integer.parseInt(args[0]) : 1_000_000;
    int iterations = args.length > 1 ? Integer.parseInt(args[1]) : 7;
    int ranks = 3;
    StructType schema = schema();
    long payload = (long) n * (8 + 4L * FLOATS);
    System.out.printf(
        "rows=%d, columns=1 long + %d float, payload=%.1f MB (values only), iterations=%d + 1 warm-up"
            + " (median, min-max)%n",
        n, FLOATS, mb(payload), iterations);
    try (RootAllocator root = new RootAllocator()) {
      long block = 0;
      Samples rowsUnknown = null;
      Samples rowsKnown = null;
      Samples iterate = null;
      Samples arrow = null;
      Samples heap = null;
      Samples copy = null;
      Samples wrap = null;
      Samples scan = null;
      Samples sparkCache = null;
      Samples cachedBytes = null;
      List<CachedBatch> cache = cachedBatches(n, schema);
      int[] allColumns = new int[FLOATS + 1];
      for (int c = 0; c <= FLOATS; c++) {
        allColumns[c] = c;
      }
      OnHeapColumnVector[] heapCols = OnHeapColumnVector.allocateColumns(n, schema);
      for (int i = 0; i < n; i++) {
        heapCols[0].putLong(i, i);
        for (int k = 1; k <= FLOATS; k++) {
          heapCols[k].putFloat(i, i * 0.5f + k);
        }
      }
      ColumnarBatch heapBatch = new ColumnarBatch(heapCols, n);
      for (int it = 0; it <= iterations; it++) {
        BufferAllocator task = root.newChildAllocator("task", 0, Long.MAX_VALUE);
        long t0 = System.nanoTime();
        LocalBlock p = PartitionWriter.fromRows(rows(n), schema, "UTC", task);
        long t1 = System.nanoTime();
        if (it == 0) {
          block = p.layout().blockBytes();
          rowsUnknown = new Samples("rows -> Arrow (fromRows, count unknown)", n, block);
          rowsKnown = new Samples("rows -> Arrow (fromRows, count known)", n, block);
          iterate = new Samples("  (input iterator alone, no conversion)", n, block);
          arrow = new Samples("Arrow batch -> Arrow (fromBatches)", n, block);
          heap = new Samples("on-heap batch -> Arrow (fromBatches)", n, block);
          copy = new Samples("simulated transfer of 2 blocks (memcpy)", 2L * n, 2 * block);
          wrap =
              new Samples("wrap " + ranks + " ranks (zero copy)", (long) ranks * n, ranks * block);
          sparkCache =
              new Samples("cached -> Spark on-heap batches -> Arrow (fromBatches)", n, block);
          cachedBytes = new Samples("cached bytes -> Arrow (fromCachedBatches)", n, block);
          scan =
              new Samples(
                  "scan " + ranks + " ranks via ColumnVector getters",
                  (long) ranks * n,
                  ranks * block);
        } else {
          rowsUnknown.add(t0, t1);
        }
        t0 = System.nanoTime();
        try (LocalBlock q = PartitionWriter.fromRows(rows(n), schema, "UTC", task, n)) {
          t1 = System.nanoTime();
        }
        if (it > 0) {
          rowsKnown.add(t0, t1);
        }
        t0 = System.nanoTime();
        long check = 0;
        for (Iterator<InternalRow> it2 = rows(n); it2.hasNext(); ) {
          check += it2.next().getLong(0);
        }
        t1 = System.nanoTime();
        if (it > 0) {
          iterate.add(t0, t1);
        }
        if (check == 42) {
          System.out.println();
        }

        // A cached DataFrame: Spark's decoding into fresh on-heap vectors per batch, as its
        // columnar cache reader does, then the batches; or the cached bytes directly.
        t0 = System.nanoTime();
        try (LocalBlock q =
            PartitionWriter.fromBatches(sparkDecoded(cache, schema), schema, "UTC", task)) {
          t1 = System.nanoTime();
        }
        if (it > 0) {
          sparkCache.add(t0, t1);
        }
        t0 = System.nanoTime();
        try (LocalBlock q =
            PartitionWriter.fromCachedBatches(cache.iterator(), allColumns, schema, "UTC", task)) {
          t1 = System.nanoTime();
        }
        if (it > 0) {
          cachedBytes.add(t0, t1);
        }

        // Columnar, Arrow source: the vectors just written, as a Spark batch.
        List<FieldVector> vs = p.root().getFieldVectors();
        ColumnVector[] cols = new ColumnVector[vs.size()];
        for (int c = 0; c < cols.length; c++) {
          cols[c] = new ArrowColumnVector(vs.get(c));
        }
        ColumnarBatch arrowBatch = new ColumnarBatch(cols, n);
        t0 = System.nanoTime();
        try (LocalBlock q =
            PartitionWriter.fromBatches(List.of(arrowBatch).iterator(), schema, "UTC", task)) {
          t1 = System.nanoTime();
        }
        if (it > 0) {
          arrow.add(t0, t1);
        }
        t0 = System.nanoTime();
        try (LocalBlock q =
            PartitionWriter.fromBatches(List.of(heapBatch).iterator(), schema, "UTC", task)) {
          t1 = System.nanoTime();
        }
        if (it > 0) {
          heap.add(t0, t1);
        }

        // Receive side: every rank sent the same block; this is rank 0.
        List<BlockLayout> layouts = new ArrayList<>();
        for (int r = 0; r < ranks; r++) {
          layouts.add(BlockLayout.fromBytes(p.layout().toBytes()));
        }
        ReceiveDisplacements placement = ReceiveDisplacements.of(layouts, 0);
        long[] displs = placement.displacements();
        BufferAllocator comm = root.newChildAllocator("comm", 0, Long.MAX_VALUE);
        ArrowBuf recv = comm.buffer(placement.totalBytes());
        long[] addr = p.segmentAddresses();
        long[] len = p.segmentLengths();
        t0 = System.nanoTime();
        for (int r = 1; r < ranks; r++) {
          long pos = recv.memoryAddress() + displs[r];
          for (int s = 0; s < addr.length; s++) {
            org.apache.arrow.memory.util.MemoryUtil.copyMemory(addr[s], pos, len[s]);
            pos += len[s];
          }
        }
        t1 = System.nanoTime();
        if (it > 0) {
          copy.add(t0, t1);
        }
        BufferAllocator out = root.newChildAllocator("out", 0, Long.MAX_VALUE);
        t0 = System.nanoTime();
        GatheredPartitions g = GatheredPartitions.wrap(recv, layouts, displs, 0, p, schema, out);
        t1 = System.nanoTime();
        if (it > 0) {
          wrap.add(t0, t1);
        }
        recv.close();
        // Scan every value of every rank through the ColumnarBatch API, as a consumer would.
        t0 = System.nanoTime();
        double sum = 0;
        for (int r = 0; r < ranks; r++) {
          ColumnarBatch b = g.batch(r);
          int rowsInBatch = b.numRows();
          for (int c = 1; c < b.numCols(); c++) {
            ColumnVector v = b.column(c);
            if (c == 1) {
              for (int i = 0; i < rowsInBatch; i++) {
                sum += v.getLong(i);
              }
            } else {
              for (int i = 0; i < rowsInBatch; i++) {
                if (!v.isNullAt(i)) {
                  sum += v.getFloat(i);
                }
              }
            }
          }
        }
        t1 = System.nanoTime();
        if (it > 0) {
          scan.add(t0, t1);
        }
        if (sum == 42) {
          System.out.println();
        }
        g.close();
        out.close();
        comm.close();
        p.close();
        task.close();
      }
      heapBatch.close();
      System.out.printf(
          "block per rank: %.1f MB (incl. validity bitmaps and padding)%n", mb(block));
      for (Samples s :
          List.of(
              rowsUnknown,
              rowsKnown,
              iterate,
              sparkCache,
              cachedBytes,
              arrow,
              heap,
              copy,
              wrap,
              scan)) {
        s.report();
      }
    }
  }
}
