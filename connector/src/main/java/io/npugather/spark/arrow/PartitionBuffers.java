package io.npugather.spark.arrow;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.util.MemoryUtil;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.ValueVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.VectorUnloader;
import org.apache.arrow.vector.compare.TypeEqualsVisitor;
import org.apache.arrow.vector.compression.NoCompressionCodec;
import org.apache.arrow.vector.ipc.message.ArrowFieldNode;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.arrow.vector.util.VectorAppender;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.columnar.CachedBatch;
import org.apache.spark.sql.execution.arrow.ArrowFieldWriter;
import org.apache.spark.sql.execution.arrow.ArrowWriter;
import org.apache.spark.sql.execution.arrow.ArrowWriter$;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.ArrowUtils;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * One rank's partition as Arrow vectors from a per-task allocator, and the memory segments to send
 * for it.
 *
 * <p>The segments ({@link #segmentAddresses()}, {@link #segmentLengths()}) point straight at the
 * vectors' buffers (no copy); their concatenation is the block {@link #layout()} describes. A
 * buffer whose length is not a multiple of 8 is padded with zeros: inside its own allocation when
 * it has the room (the usual case: one segment per buffer), else by a padding segment pointing at
 * a small zeroed buffer. Addresses stay valid until {@link #close()}. Not thread-safe.
 */
public final class PartitionBuffers implements AutoCloseable {
  private final VectorSchemaRoot root;
  private final StructType schema;
  private final PartitionLayout layout;
  private final long[] segmentAddresses;
  private final long[] segmentLengths;
  private ArrowBuf zeros;
  private boolean closed;

  /** Tests turn this off to exercise padding segments. */
  static boolean padInPlace = true;

  private PartitionBuffers(
      BufferAllocator allocator, VectorSchemaRoot root, StructType schema, long fingerprint) {
    this.root = root;
    this.schema = schema;
    // Built once: the buffer list and nodes in VectorLoader order, straight from Arrow's unloader.
    try (ArrowRecordBatch rb =
        new VectorUnloader(root, true, NoCompressionCodec.INSTANCE, true).getRecordBatch()) {
      List<ArrowFieldNode> nodes = rb.getNodes();
      long[] lengths = new long[nodes.size()];
      long[] nulls = new long[nodes.size()];
      for (int i = 0; i < lengths.length; i++) {
        lengths[i] = nodes.get(i).getLength();
        nulls[i] = nodes.get(i).getNullCount();
      }
      List<ArrowBuf> bufs = rb.getBuffers();
      long[] bufferLengths = new long[bufs.size()];
      // Padding goes into a buffer's own slack when it has room (zeroed here, beyond the values),
      // so that buffer is one segment; otherwise a padding segment points at a zeroed buffer.
      boolean[] paddedInPlace = new boolean[bufs.size()];
      int segments = 0;
      boolean needZeros = false;
      for (int i = 0; i < bufferLengths.length; i++) {
        ArrowBuf b = bufs.get(i);
        long len = b.readableBytes();
        bufferLengths[i] = len;
        if (len == 0) {
          continue;
        }
        segments++;
        long pad = PartitionLayout.align8(len) - len;
        if (pad != 0) {
          if (padInPlace && b.capacity() - b.readerIndex() >= len + pad) {
            b.setZero(b.readerIndex() + len, pad);
            paddedInPlace[i] = true;
          } else {
            segments++;
            needZeros = true;
          }
        }
      }
      List<Long> variadic = rb.getVariadicBufferCounts();
      long[] variadicCounts = new long[variadic == null ? 0 : variadic.size()];
      for (int i = 0; i < variadicCounts.length; i++) {
        variadicCounts[i] = variadic.get(i);
      }
      this.layout =
          new PartitionLayout(
              fingerprint, root.getRowCount(), lengths, nulls, bufferLengths, variadicCounts);
      if (needZeros) {
        zeros = allocator.buffer(8);
        zeros.setZero(0, 8);
      }
      this.segmentAddresses = new long[segments];
      this.segmentLengths = new long[segments];
      int s = 0;
      for (int i = 0; i < bufferLengths.length; i++) {
        ArrowBuf b = bufs.get(i);
        long len = bufferLengths[i];
        if (len == 0) {
          continue;
        }
        long pad = PartitionLayout.align8(len) - len;
        segmentAddresses[s] = b.memoryAddress() + b.readerIndex();
        if (paddedInPlace[i]) {
          segmentLengths[s++] = len + pad;
          continue;
        }
        segmentLengths[s++] = len;
        if (pad != 0) {
          segmentAddresses[s] = zeros.memoryAddress();
          segmentLengths[s++] = pad;
        }
      }
    }
  }

  /** The Arrow schema Spark's own Arrow conversion uses for {@code schema} (int32 offsets). */
  public static Schema arrowSchema(StructType schema, String timeZoneId) {
    return ArrowUtils.toArrowSchema(schema, timeZoneId, true, false);
  }

  /**
   * Writes {@code rows} (InternalRows of {@code schema}) into Arrow vectors allocated from {@code
   * allocator}; the same buffers as Spark's own {@link ArrowWriter} gives. Same as {@link
   * #fromRows(Iterator, StructType, String, BufferAllocator, int)} with an unknown row count.
   *
   * @param timeZoneId the session time zone; used for timestamp columns, may be null without them
   */
  public static PartitionBuffers fromRows(
      Iterator<InternalRow> rows, StructType schema, String timeZoneId, BufferAllocator allocator) {
    return fromRows(rows, schema, timeZoneId, allocator, -1);
  }

  /**
   * Writes {@code rows} into Arrow vectors allocated from {@code allocator}, producing the same
   * buffers as Spark's own {@link ArrowWriter}: fixed-width columns and arrays of fixed-width
   * elements straight from the rows' memory ({@link FixedWidthRowWriter}), any other column with
   * Spark's field writer.
   *
   * @param timeZoneId the session time zone; used for timestamp columns, may be null without them
   * @param expectedRows the number of rows if known (the vectors are sized for it up front), or
   *     a negative number
   */
  public static PartitionBuffers fromRows(
      Iterator<InternalRow> rows,
      StructType schema,
      String timeZoneId,
      BufferAllocator allocator,
      int expectedRows) {
    Schema arrow = arrowSchema(schema, timeZoneId);
    VectorSchemaRoot root = VectorSchemaRoot.create(arrow, allocator);
    try {
      FixedWidthRowWriter writer = new FixedWidthRowWriter(root, schema, expectedRows);
      while (rows.hasNext()) {
        writer.write(rows.next());
      }
      writer.finish();
      root.setRowCount(writer.count());
      return new PartitionBuffers(allocator, root, schema, PartitionLayout.fingerprint(arrow));
    } catch (Throwable t) {
      root.close();
      throw t;
    }
  }

  /**
   * Writes columnar {@code batches} of {@code schema} into Arrow vectors allocated from {@code
   * allocator}, column by column without materializing rows. A column backed by an Arrow vector of
   * exactly the expected Arrow type is appended buffer-wise (bulk copies); a fixed-width primitive
   * column (byte, short, int, long, float, double, date, timestamp, timestamp_ntz) of any other
   * vector class is copied in a tight typed loop (one memory copy for an off-heap vector without
   * nulls); any other column (Spark's on-heap/off-heap vectors of other types, constant vectors,
   * Arrow vectors of another type) is written value by value with Spark's Arrow field writers.
   * Batches are only read while they are current, so producers that reuse their vectors are fine.
   */
  public static PartitionBuffers fromBatches(
      Iterator<ColumnarBatch> batches,
      StructType schema,
      String timeZoneId,
      BufferAllocator allocator) {
    Schema arrow = arrowSchema(schema, timeZoneId);
    VectorSchemaRoot root = VectorSchemaRoot.create(arrow, allocator);
    try {
      int numFields = schema.fields().length;
      List<FieldVector> targets = root.getFieldVectors();
      ArrowFieldWriter[] writers = new ArrowFieldWriter[numFields];
      for (int c = 0; c < numFields; c++) {
        FieldVector v = targets.get(c);
        v.allocateNew();
        writers[c] = ArrowWriter$.MODULE$.createFieldWriter(v);
      }
      ColumnAppender[] appenders = new ColumnAppender[numFields];
      long total;
      try {
        total = writeBatches(batches, schema, targets, writers, appenders, allocator);
      } finally {
        for (ColumnAppender a : appenders) {
          if (a != null) {
            a.close();
          }
        }
      }
      for (int c = 0; c < numFields; c++) {
        if (appenders[c] == null) {
          writers[c].finish();
        } else {
          // Not the writer's finish(): its nested child writers never ran and would reset the
          // children's value counts. The vector derives its children's counts itself.
          targets.get(c).setValueCount(writers[c].count());
        }
      }
      root.setRowCount((int) total);
      return new PartitionBuffers(allocator, root, schema, PartitionLayout.fingerprint(arrow));
    } catch (Throwable t) {
      root.close();
      throw t;
    }
  }

  /**
   * Writes the batches of a DataFrame cached in Spark's default format into Arrow vectors
   * allocated from {@code allocator}, straight from the cached bytes ({@link CachedBatchColumns}).
   *
   * @param columns for each field of {@code schema}, the index of its buffer in a cached batch
   * @throws IllegalArgumentException if a column's type is not one {@link
   *     #supportsCachedBatches} accepts, or a batch is not in Spark's default format
   */
  public static PartitionBuffers fromCachedBatches(
      Iterator<CachedBatch> batches,
      int[] columns,
      StructType schema,
      String timeZoneId,
      BufferAllocator allocator) {
    if (!supportsCachedBatches(schema)) {
      throw new IllegalArgumentException(
          "schema " + schema.simpleString() + " has a column of a type Spark's cache does not "
              + "decode as columns; allowed: boolean, byte, short, int, long, float, double, and "
              + "arrays of boolean, byte, short, int, long, float, double, date, timestamp, "
              + "timestamp_ntz");
    }
    if (columns.length != schema.fields().length) {
      throw new IllegalArgumentException(
          "columns has " + columns.length + " entries for " + schema.fields().length + " fields");
    }
    Schema arrow = arrowSchema(schema, timeZoneId);
    VectorSchemaRoot root = VectorSchemaRoot.create(arrow, allocator);
    try {
      CachedBatchColumns.write(batches, columns, schema, root);
      return new PartitionBuffers(allocator, root, schema, PartitionLayout.fingerprint(arrow));
    } catch (Throwable t) {
      root.close();
      throw t;
    }
  }

  /** True if {@link #fromCachedBatches} takes a partition of {@code schema}. */
  public static boolean supportsCachedBatches(StructType schema) {
    return CachedBatchColumns.supports(schema);
  }

  private static long writeBatches(
      Iterator<ColumnarBatch> batches,
      StructType schema,
      List<FieldVector> targets,
      ArrowFieldWriter[] writers,
      ColumnAppender[] appenders,
      BufferAllocator allocator) {
    int numFields = writers.length;
    long total = 0;
    while (batches.hasNext()) {
      ColumnarBatch batch = batches.next();
      if (batch.numCols() != numFields) {
        throw new IllegalArgumentException(
            "columnar batch has "
                + batch.numCols()
                + " column(s), the schema "
                + schema.simpleString()
                + " has "
                + numFields);
      }
      int n = batch.numRows();
      if (n == 0) {
        continue;
      }
      if (total + n > Integer.MAX_VALUE) {
        throw new IllegalArgumentException(
            "partition exceeds 2^31-1 rows, the limit of one Arrow batch");
      }
      if (total == 0) {
        // Size the vectors for the first batch instead of growing them from Arrow's default.
        for (FieldVector v : targets) {
          v.clear();
          v.setInitialCapacity(n);
          v.allocateNew();
        }
      }
      for (int c = 0; c < numFields; c++) {
        ColumnVector cv = batch.column(c);
        ArrowFieldWriter w = writers[c];
        if (total == 0 && sameArrowType(targets.get(c), cv, n)) {
          // Decided on the first non-empty batch: this column is appended buffer-wise.
          appenders[c] = new ColumnAppender(targets.get(c), allocator);
        }
        int kind;
        if (appenders[c] != null) {
          appenders[c].append(cv, n, w);
        } else if ((kind = PrimitiveColumns.kind(targets.get(c))) != 0) {
          PrimitiveColumns.copy(kind, targets.get(c), cv, w.count(), n);
          w.count_$eq(w.count() + n);
        } else {
          ColumnarArray values = new ColumnarArray(cv, 0, n);
          for (int i = 0; i < n; i++) {
            w.write(values, i);
          }
        }
      }
      total += n;
    }
    return total;
  }

  private static boolean sameArrowType(FieldVector target, ColumnVector cv, int rows) {
    ValueVector src = arrowVector(cv);
    return src != null
        && src.getValueCount() == rows
        && new TypeEqualsVisitor(target, false, false).equals(src);
  }

  /** The Arrow vector behind {@code cv}, or null. */
  private static ValueVector arrowVector(ColumnVector cv) {
    if (cv instanceof ArrowColumnVector) {
      return ((ArrowColumnVector) cv).getValueVector();
    } else if (cv instanceof FixedWidthArrowColumn) {
      return ((FixedWidthArrowColumn) cv).getValueVector();
    }
    return null;
  }

  /**
   * Appends whole Arrow vectors to one target column with Arrow's {@link VectorAppender} (bulk
   * buffer copies). A batch whose column is not an Arrow vector of the same type is first written
   * into a scratch vector with Spark's field writer, then appended.
   */
  private static final class ColumnAppender implements AutoCloseable {
    private final FieldVector target;
    private final BufferAllocator allocator;
    private FieldVector scratch;
    private ArrowFieldWriter scratchWriter;

    ColumnAppender(FieldVector target, BufferAllocator allocator) {
      this.target = target;
      this.allocator = allocator;
    }

    void append(ColumnVector cv, int n, ArrowFieldWriter targetWriter) {
      ValueVector src;
      if (sameArrowType(target, cv, n)) {
        src = arrowVector(cv);
      } else {
        if (scratch == null) {
          scratch = target.getField().createVector(allocator);
          scratch.allocateNew();
          scratchWriter = ArrowWriter$.MODULE$.createFieldWriter(scratch);
        }
        scratchWriter.reset();
        ColumnarArray values = new ColumnarArray(cv, 0, n);
        for (int i = 0; i < n; i++) {
          scratchWriter.write(values, i);
        }
        scratchWriter.finish();
        src = scratch;
      }
      // The appender appends after the target's value count: the rows written so far.
      target.setValueCount(targetWriter.count());
      src.accept(new VectorAppender(target), null);
      targetWriter.count_$eq(targetWriter.count() + n);
    }

    @Override
    public void close() {
      if (scratch != null) {
        scratch.close();
        scratch = null;
      }
    }
  }

  /** This rank's metadata. */
  public PartitionLayout layout() {
    return layout;
  }

  /** The Spark schema of the columns (without the source-rank column). */
  public StructType schema() {
    return schema;
  }

  /** The Arrow vectors holding the partition. Valid until {@link #close()}; do not modify. */
  public VectorSchemaRoot root() {
    return root;
  }

  /**
   * Start addresses of what to send, in order. Their concatenation is exactly {@code
   * layout().blockBytes()} bytes laid out as {@link #layout()} says. Zero-length buffers have no
   * segment. Returns a copy.
   */
  public long[] segmentAddresses() {
    return segmentAddresses.clone();
  }

  /** Lengths of the segments of {@link #segmentAddresses()}. Returns a copy. */
  public long[] segmentLengths() {
    return segmentLengths.clone();
  }

  /**
   * Copies the block (every segment, in order) to {@code address}, which must have room for
   * {@code layout().blockBytes()} bytes. For transports that need one contiguous send buffer.
   */
  public void copyBlockTo(long address) {
    checkOpen();
    long pos = address;
    for (int s = 0; s < segmentAddresses.length; s++) {
      MemoryUtil.copyMemory(segmentAddresses[s], pos, segmentLengths[s]);
      pos += segmentLengths[s];
    }
  }

  /** Number of segments. */
  public int segmentCount() {
    return segmentAddresses.length;
  }

  public long rowCount() {
    return layout.rowCount();
  }

  /**
   * This rank's own partition as a batch: an int column holding {@code sourceRank}, then the
   * input vectors themselves (no copy). Valid until {@link #close()}. Closing the batch releases
   * the vectors early; {@link #close()} stays safe afterwards.
   */
  public ColumnarBatch ownBatch(int sourceRank) {
    checkOpen();
    return batch(sourceRank, root, schema);
  }

  /**
   * {@code root}'s vectors (of Spark schema {@code schema}) as a batch after a constant
   * source-rank column; the columns read the vectors in place.
   */
  static ColumnarBatch batch(int sourceRank, VectorSchemaRoot root, StructType schema) {
    List<FieldVector> vectors = root.getFieldVectors();
    ColumnVector[] cols = new ColumnVector[vectors.size() + 1];
    cols[0] = sourceRankColumn(sourceRank, root.getRowCount());
    for (int c = 0; c < vectors.size(); c++) {
      cols[c + 1] = FixedWidthArrowColumn.of(schema.fields()[c].dataType(), vectors.get(c));
    }
    return new ColumnarBatch(cols, root.getRowCount());
  }

  /** A constant int column: no memory per row, and Spark reads it like any other vector. */
  static ColumnVector sourceRankColumn(int sourceRank, int rows) {
    ConstantColumnVector v = new ConstantColumnVector(rows, DataTypes.IntegerType);
    v.setInt(sourceRank);
    return v;
  }

  private void checkOpen() {
    if (closed) {
      throw new IllegalStateException("PartitionBuffers is closed");
    }
  }

  /** Releases every vector and the padding buffer. Idempotent. */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    try {
      root.close();
    } finally {
      if (zeros != null) {
        zeros.close();
        zeros = null;
      }
    }
  }

  static List<ArrowFieldNode> nodes(PartitionLayout l) {
    List<ArrowFieldNode> nodes = new ArrayList<>(l.nodeCount());
    for (int i = 0; i < l.nodeCount(); i++) {
      nodes.add(new ArrowFieldNode(l.nodeLength(i), l.nodeNullCount(i)));
    }
    return nodes;
  }
}
