package io.npugather.spark.arrow;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorLoader;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.message.ArrowFieldNode;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.arrow.vector.compression.NoCompressionCodec;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Every source rank's Arrow vectors rebuilt over slices of one receive buffer, without copying:
 * each vector buffer is a reference-counted {@link ArrowBuf} slice of the receive buffer, loaded
 * with Arrow's {@link VectorLoader}. This rank's own partition is served from its {@link
 * PartitionBuffers} directly.
 *
 * <p>Each rank's batch holds an int source-rank column first, then the columns: {@link
 * FixedWidthArrowColumn} for fixed-width columns and arrays of them, {@link SharedArrowColumn}
 * (Spark's {@code ArrowColumnVector}) for the others ({@link #columnClassNames} names them).
 * Batches stay valid until {@link #close()}; closing one leaves the vectors open. Readers in
 * several threads each take their own batches.
 */
public final class GatheredPartitions implements AutoCloseable {
  private final ArrowBuf recv;
  private final VectorSchemaRoot[] roots; // null at the own rank, whose vectors are own's
  private final PartitionBuffers own;
  private final StructType schema;
  private final int ownRank;
  private final long totalRows;
  private boolean closed;

  private GatheredPartitions(ArrowBuf recv, VectorSchemaRoot[] roots, PartitionBuffers own,
      StructType schema, int ownRank, long rows) {
    this.recv = recv;
    this.roots = roots;
    this.own = own;
    this.schema = schema;
    this.ownRank = ownRank;
    this.totalRows = rows;
  }

  /**
   * Rebuilds every rank's vectors.
   *
   * @param recv holds rank r's block at byte {@code displs[r]} for every {@code r != ownRank}; may
   *     be null when every other rank's block is empty. One reference is taken (released in {@link
   *     #close()}); the caller keeps its own.
   * @param layouts every rank's layout, in rank order
   * @param displs every rank's byte displacement in {@code recv}, multiples of 8 ({@code
   *     displs[ownRank]} is not used); may hold one extra trailing entry
   * @param ownRank this rank
   * @param own this rank's partition; its vectors serve rank {@code ownRank}'s batch and must stay
   *     open until this object is closed
   * @param schema the Spark schema of the columns (without the source-rank column)
   * @param allocator allocator for the rebuilt vectors (they hold no memory of their own except
   *     validity bitmaps Arrow synthesizes for empty ones)
   * @throws IllegalStateException if a layout's schema fingerprint differs from {@code own}'s, a
   *     layout does not match the schema's structure, a block does not fit in {@code recv}, or a
   *     block's buffers are too short for its value counts or its offsets point outside them
   */
  public static GatheredPartitions wrap(
      ArrowBuf recv,
      List<PartitionLayout> layouts,
      long[] displs,
      int ownRank,
      PartitionBuffers own,
      StructType schema,
      BufferAllocator allocator) {
    int ranks = layouts.size();
    if (ranks == 0) {
      throw new IllegalArgumentException("layouts is empty: there must be one per rank");
    }
    if (ownRank < 0 || ownRank >= ranks) {
      throw new IllegalArgumentException(
          "ownRank " + ownRank + " is outside [0, " + ranks + ")");
    }
    if (displs.length != ranks && displs.length != ranks + 1) {
      throw new IllegalArgumentException(
          "displs has " + displs.length + " entries for " + ranks + " rank(s)");
    }
    if (!own.schema().equals(schema)) {
      throw new IllegalStateException(
          "own partition's schema "
              + own.schema().simpleString()
              + " differs from the requested schema "
              + schema.simpleString());
    }
    PartitionLayout ownLayout = own.layout();
    if (!layouts.get(ownRank).equals(ownLayout)) {
      throw new IllegalStateException(
          "layout of rank " + ownRank + " (this rank) differs from its own partition's layout");
    }
    long fp = ownLayout.schemaFingerprint();
    Schema arrowSchema = own.root().getSchema();
    int expectedNodes = PartitionLayout.expectedNodeCount(arrowSchema);
    int expectedBuffers = PartitionLayout.expectedBufferCount(arrowSchema);
    int[] topLevelNodes = PartitionLayout.topLevelNodeIndices(arrowSchema);
    long recvCapacity = recv == null ? 0 : recv.capacity();
    long rows = 0;
    for (int r = 0; r < ranks; r++) {
      PartitionLayout l = layouts.get(r);
      if (l.schemaFingerprint() != fp) {
        throw new IllegalStateException(
            "schema mismatch: rank "
                + r
                + " wrote its partition with schema fingerprint "
                + Long.toHexString(l.schemaFingerprint())
                + ", rank "
                + ownRank
                + " with "
                + Long.toHexString(fp)
                + " ("
                + schema.simpleString()
                + "); every rank must produce the same schema");
      }
      if (l.nodeCount() != expectedNodes
          || (expectedBuffers >= 0 && l.bufferCount() != expectedBuffers)) {
        throw new IllegalStateException(
            "layout of rank "
                + r
                + " has "
                + l.nodeCount()
                + " node(s) and "
                + l.bufferCount()
                + " buffer(s), the schema needs "
                + expectedNodes
                + " and "
                + expectedBuffers);
      }
      if (l.rowCount() > Integer.MAX_VALUE) {
        throw new IllegalStateException(
            "rank " + r + " has " + l.rowCount() + " rows, more than one Arrow batch can hold");
      }
      for (int node : topLevelNodes) {
        if (l.nodeLength(node) != l.rowCount()) {
          throw new IllegalStateException(
              "layout of rank "
                  + r
                  + ": a column has "
                  + l.nodeLength(node)
                  + " values for "
                  + l.rowCount()
                  + " rows");
        }
      }
      rows += l.rowCount();
      if (r == ownRank) {
        continue;
      }
      if (l.blockBytes() == 0) {
        if (expectedBuffers >= 0) {
          BlockValidator.check(arrowSchema, l, null, 0, r);
        }
        continue;
      }
      long d = displs[r];
      if (d < 0 || (d & 7) != 0) {
        throw new IllegalStateException(
            "displacement of rank " + r + " is " + d + ", it must be a non-negative multiple of 8");
      }
      if (recv == null || d > recvCapacity - l.blockBytes()) {
        throw new IllegalStateException(
            "block of rank "
                + r
                + " ("
                + l.blockBytes()
                + " bytes at displacement "
                + d
                + ") does not fit in the receive buffer of "
                + recvCapacity
                + " bytes");
      }
      if (expectedBuffers >= 0) {
        BlockValidator.check(arrowSchema, l, recv, d, r);
      }
    }

    VectorSchemaRoot[] roots = new VectorSchemaRoot[ranks];
    boolean retained = false;
    try {
      if (recv != null) {
        recv.getReferenceManager().retain();
        retained = true;
      }
      for (int r = 0; r < ranks; r++) {
        if (r == ownRank) {
          continue;
        }
        PartitionLayout l = layouts.get(r);
        VectorSchemaRoot root = VectorSchemaRoot.create(arrowSchema, allocator);
        roots[r] = root;
        load(root, recv, displs[r], l, allocator);
      }
      return new GatheredPartitions(retained ? recv : null, roots, own, schema, ownRank, rows);
    } catch (Throwable t) {
      for (VectorSchemaRoot root : roots) {
        if (root != null) {
          root.close();
        }
      }
      if (retained) {
        recv.getReferenceManager().release();
      }
      throw t;
    }
  }

  private static void load(
      VectorSchemaRoot root,
      ArrowBuf recv,
      long displ,
      PartitionLayout l,
      BufferAllocator allocator) {
    List<ArrowBuf> slices = new ArrayList<>(l.bufferCount());
    for (int i = 0; i < l.bufferCount(); i++) {
      long len = l.bufferLength(i);
      slices.add(len == 0 ? allocator.getEmpty() : recv.slice(displ + l.bufferOffset(i), len));
    }
    List<ArrowFieldNode> nodes = PartitionBuffers.nodes(l);
    // The record batch retains the slices, the loaded vectors retain them again; closing the
    // record batch leaves exactly the vectors' references.
    try (ArrowRecordBatch rb =
        new ArrowRecordBatch(
            (int) l.rowCount(),
            nodes,
            slices,
            NoCompressionCodec.DEFAULT_BODY_COMPRESSION,
            PartitionLayout.boxed(l.variadicBufferCountsUnsafe()),
            true,
            true)) {
      new VectorLoader(root).load(rb);
    }
  }

  /**
   * The Spark schema of {@link #batch(int)}: {@code sourceRankColumn} (int, not nullable) first,
   * then {@code input}'s fields.
   *
   * @throws IllegalArgumentException if {@code sourceRankColumn} is empty or names an input column
   *     (compared case-insensitively, as Spark resolves names by default)
   */
  public static StructType outputSchema(StructType input, String sourceRankColumn) {
    if (sourceRankColumn == null || sourceRankColumn.isEmpty()) {
      throw new IllegalArgumentException("sourceRankColumn must be a non-empty column name");
    }
    String lower = sourceRankColumn.toLowerCase(Locale.ROOT);
    StructField[] in = input.fields();
    StructField[] out = new StructField[in.length + 1];
    out[0] = DataTypes.createStructField(sourceRankColumn, DataTypes.IntegerType, false);
    for (int i = 0; i < in.length; i++) {
      if (in[i].name().toLowerCase(Locale.ROOT).equals(lower)) {
        throw new IllegalArgumentException(
            "sourceRankColumn '"
                + sourceRankColumn
                + "' collides with input column '"
                + in[i].name()
                + "'; choose another name for the source-rank column");
      }
      out[i + 1] = in[i];
    }
    return new StructType(out);
  }

  /**
   * The class of every column of {@link #batch(int)}, source-rank column first: what Spark's
   * generated code may cast the columns to.
   */
  public static String[] columnClassNames(StructType input) {
    StructField[] in = input.fields();
    String[] names = new String[in.length + 1];
    names[0] = ConstantColumnVector.class.getName();
    for (int i = 0; i < in.length; i++) {
      names[i + 1] = FixedWidthArrowColumn.columnClassName(in[i].dataType());
    }
    return names;
  }

  /** Number of ranks. */
  public int numRanks() {
    return roots.length;
  }

  /** Rows over all ranks. */
  public long totalRows() {
    return totalRows;
  }

  /**
   * Rank {@code sourceRank}'s rows: the int source-rank column, then the columns. A new batch
   * object on every call, over the same vectors, so that readers in several threads never share
   * a column's reading state. Valid until {@link #close()}; callers should not close it.
   */
  public ColumnarBatch batch(int sourceRank) {
    if (closed) {
      throw new IllegalStateException("GatheredPartitions is closed");
    }
    if (sourceRank < 0 || sourceRank >= roots.length) {
      throw new IllegalArgumentException(
          "sourceRank " + sourceRank + " is outside [0, " + roots.length + ")");
    }
    return sourceRank == ownRank
        ? own.ownBatch(sourceRank)
        : PartitionBuffers.batch(sourceRank, roots[sourceRank], schema);
  }

  /** This rank. */
  public int ownRank() {
    return ownRank;
  }

  /**
   * Releases the rebuilt vectors and the reference to the receive buffer. The own rank's vectors
   * belong to its {@link PartitionBuffers}, closed by its owner. Idempotent.
   */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    Throwable failure = null;
    for (int r = 0; r < roots.length; r++) {
      if (roots[r] != null) {
        try {
          roots[r].close();
        } catch (Throwable t) {
          failure = addSuppressed(failure, t);
        }
        roots[r] = null;
      }
    }
    if (recv != null) {
      try {
        recv.getReferenceManager().release();
      } catch (Throwable t) {
        failure = addSuppressed(failure, t);
      }
    }
    if (failure instanceof RuntimeException) {
      throw (RuntimeException) failure;
    } else if (failure instanceof Error) {
      throw (Error) failure;
    }
  }

  private static Throwable addSuppressed(Throwable first, Throwable next) {
    if (first == null) {
      return next;
    }
    first.addSuppressed(next);
    return first;
  }
}
