package io.npugather.spark.arrow.write;

import io.npugather.block.LocalBlock;
import java.util.Iterator;
import java.util.function.Consumer;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.columnar.CachedBatch;
import org.apache.spark.sql.execution.arrow.ArrowWriter;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.ArrowUtils;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * One rank's partition into Arrow vectors from a per-task allocator, as the {@link LocalBlock} to
 * send: from rows ({@link FixedWidthRowWriter}), from columnar batches ({@link
 * ColumnarBatchWriter}) or from the batches of a DataFrame in Spark's cache ({@link
 * CachedBatchColumns}). Every path produces the same buffers as Spark's own {@link ArrowWriter}.
 */
public final class PartitionWriter {
  private PartitionWriter() {}

  /** The Arrow schema Spark's own Arrow conversion uses for {@code schema} (int32 offsets). */
  private static Schema arrowSchema(StructType schema, String timeZoneId) {
    return ArrowUtils.toArrowSchema(schema, timeZoneId, true, false);
  }

  /**
   * Writes {@code rows} (InternalRows of {@code schema}) into Arrow vectors allocated from {@code
   * allocator}; the same buffers as Spark's own {@link ArrowWriter} gives. Same as {@link
   * #fromRows(Iterator, StructType, String, BufferAllocator, int)} with an unknown row count.
   *
   * @param timeZoneId the session time zone; used for timestamp columns, may be null without them
   */
  public static LocalBlock fromRows(
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
   * @param expectedRows the number of rows if known (the vectors are sized for it up front), or a
   *     negative number
   */
  public static LocalBlock fromRows(
      Iterator<InternalRow> rows,
      StructType schema,
      String timeZoneId,
      BufferAllocator allocator,
      int expectedRows) {
    return write(
        schema,
        timeZoneId,
        allocator,
        root -> {
          FixedWidthRowWriter writer = new FixedWidthRowWriter(root, schema, expectedRows);
          while (rows.hasNext()) {
            writer.write(rows.next());
          }
          writer.finish();
          root.setRowCount(writer.count());
        });
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
  public static LocalBlock fromBatches(
      Iterator<ColumnarBatch> batches,
      StructType schema,
      String timeZoneId,
      BufferAllocator allocator) {
    return write(
        schema,
        timeZoneId,
        allocator,
        root -> ColumnarBatchWriter.write(batches, schema, root, allocator));
  }

  /**
   * Writes the batches of a DataFrame cached in Spark's default format into Arrow vectors allocated
   * from {@code allocator}, straight from the cached bytes ({@link CachedBatchColumns}).
   *
   * @param columns for each field of {@code schema}, the index of its buffer in a cached batch
   * @throws IllegalArgumentException if a column's type is not one {@link #supportsCachedBatches}
   *     accepts, or a batch is not in Spark's default format
   */
  public static LocalBlock fromCachedBatches(
      Iterator<CachedBatch> batches,
      int[] columns,
      StructType schema,
      String timeZoneId,
      BufferAllocator allocator) {
    if (!supportsCachedBatches(schema)) {
      throw new IllegalArgumentException(
          "schema "
              + schema.simpleString()
              + " has a column of a type Spark's cache does not "
              + "decode as columns; allowed: boolean, byte, short, int, long, float, double, and "
              + "arrays of boolean, byte, short, int, long, float, double, date, timestamp, "
              + "timestamp_ntz");
    }
    if (columns.length != schema.fields().length) {
      throw new IllegalArgumentException(
          "columns has " + columns.length + " entries for " + schema.fields().length + " fields");
    }
    return write(
        schema,
        timeZoneId,
        allocator,
        root -> CachedBatchColumns.write(batches, columns, schema, root));
  }

  /** True if {@link #fromCachedBatches} takes a partition of {@code schema}. */
  public static boolean supportsCachedBatches(StructType schema) {
    return CachedBatchColumns.supports(schema);
  }

  /**
   * Creates the vectors of {@code schema}'s Arrow schema, has {@code fill} write them (value and
   * row counts set) and hands them to the block; on failure they are released.
   */
  private static LocalBlock write(
      StructType schema,
      String timeZoneId,
      BufferAllocator allocator,
      Consumer<VectorSchemaRoot> fill) {
    VectorSchemaRoot root = VectorSchemaRoot.create(arrowSchema(schema, timeZoneId), allocator);
    try {
      fill.accept(root);
      return LocalBlock.of(root, allocator);
    } catch (Throwable t) {
      root.close();
      throw t;
    }
  }
}
