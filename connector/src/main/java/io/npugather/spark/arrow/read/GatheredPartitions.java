package io.npugather.spark.arrow.read;

import io.npugather.block.BlockLayout;
import io.npugather.block.LocalBlock;
import io.npugather.block.ReceivedBlocks;
import java.util.List;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Every source rank's partition as Spark columnar batches over the gathered Arrow vectors: the
 * peers' vectors rebuilt over slices of one receive buffer without copying ({@link
 * ReceivedBlocks}), this rank's own served from its {@link LocalBlock} directly.
 *
 * <p>Each rank's batch holds an int source-rank column first, then the columns: {@link
 * FixedWidthArrowColumn} for fixed-width columns and arrays of them, {@link SharedArrowColumn}
 * (Spark's {@code ArrowColumnVector}) for the others ({@link #columnClassNames} names them).
 * Batches stay valid until {@link #close()}; closing one leaves the vectors open. Readers in
 * several threads each take their own batches.
 */
public final class GatheredPartitions implements AutoCloseable {
  private final ArrowBuf recv;
  private final VectorSchemaRoot[] roots; // null where the vectors are a local block's
  private final LocalBlock[] local;
  private final StructType schema;
  private final long totalRows;
  private boolean closed;

  private GatheredPartitions(
      ArrowBuf recv, VectorSchemaRoot[] roots, LocalBlock[] local, StructType schema, long rows) {
    this.recv = recv;
    this.roots = roots;
    this.local = local;
    this.schema = schema;
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
   * @throws io.npugather.NpuGatherException if the ranks' layouts disagree: written with another
   *     schema ({@code INVALID_USAGE}), or a layout or block inconsistent with the schema or itself
   *     ({@code REMOTE_ERROR})
   * @throws IllegalStateException if {@code own} does not hold {@code schema}'s columns, or a block
   *     does not fit in {@code recv} at its displacement
   */
  public static GatheredPartitions wrap(
      ArrowBuf recv,
      List<BlockLayout> layouts,
      long[] displs,
      int ownRank,
      LocalBlock own,
      StructType schema,
      BufferAllocator allocator) {
    if (ownRank < 0 || ownRank >= layouts.size()) {
      throw new IllegalArgumentException(
          "ownRank " + ownRank + " is outside [0, " + layouts.size() + ")");
    }
    LocalBlock[] local = new LocalBlock[layouts.size()];
    local[ownRank] = own;
    return wrap(recv, layouts, displs, ownRank, local, schema, allocator);
  }

  /**
   * {@link #wrap(ArrowBuf, List, long[], int, LocalBlock, StructType, BufferAllocator)} with the
   * blocks of several ranks at hand, as on the ranks that share an executor: rank r's batch is
   * served from {@code local[r]} where it is non-null (open until this object is closed), from
   * {@code recv} otherwise.
   *
   * @param reporter the rank that runs the checks, one of those in {@code local}
   */
  public static GatheredPartitions wrap(
      ArrowBuf recv,
      List<BlockLayout> layouts,
      long[] displs,
      int reporter,
      LocalBlock[] local,
      StructType schema,
      BufferAllocator allocator) {
    for (LocalBlock own : local) {
      if (own != null) {
        checkColumns(own, schema);
      }
    }
    VectorSchemaRoot[] roots =
        ReceivedBlocks.load(
            recv, layouts, displs, reporter, local, schema.simpleString(), allocator);
    long rows = 0;
    for (BlockLayout l : layouts) {
      rows += l.rowCount();
    }
    if (recv != null) {
      recv.getReferenceManager().retain();
    }
    return new GatheredPartitions(recv, roots, local.clone(), schema, rows);
  }

  private static void checkColumns(LocalBlock own, StructType schema) {
    List<Field> ownFields = own.root().getSchema().getFields();
    StructField[] fields = schema.fields();
    boolean sameColumns = ownFields.size() == fields.length;
    for (int c = 0; sameColumns && c < fields.length; c++) {
      sameColumns = ownFields.get(c).getName().equals(fields[c].name());
    }
    if (!sameColumns) {
      throw new IllegalStateException(
          "own partition's columns "
              + own.root().getSchema()
              + " differ from the requested schema "
              + schema.simpleString());
    }
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
   * object on every call, over the same vectors, so that readers in several threads never share a
   * column's reading state. Valid until {@link #close()}; callers should not close it.
   */
  public ColumnarBatch batch(int sourceRank) {
    if (closed) {
      throw new IllegalStateException("GatheredPartitions is closed");
    }
    if (sourceRank < 0 || sourceRank >= roots.length) {
      throw new IllegalArgumentException(
          "sourceRank " + sourceRank + " is outside [0, " + roots.length + ")");
    }
    LocalBlock at = local[sourceRank];
    return batch(sourceRank, at != null ? at.root() : roots[sourceRank], schema);
  }

  /**
   * {@code root}'s vectors (of Spark schema {@code schema}) as a batch after a constant source-rank
   * column; the columns read the vectors in place.
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
  private static ColumnVector sourceRankColumn(int sourceRank, int rows) {
    ConstantColumnVector v = new ConstantColumnVector(rows, DataTypes.IntegerType);
    v.setInt(sourceRank);
    return v;
  }

  /**
   * Releases the rebuilt vectors and the reference to the receive buffer. The local blocks' vectors
   * belong to their {@link LocalBlock}s, closed by their owner. Idempotent.
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
