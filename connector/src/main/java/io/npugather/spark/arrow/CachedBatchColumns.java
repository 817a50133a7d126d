package io.npugather.spark.arrow;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.spark.sql.columnar.CachedBatch;
import org.apache.spark.sql.execution.columnar.ColumnAccessor$;
import org.apache.spark.sql.execution.columnar.DefaultCachedBatch;
import org.apache.spark.sql.execution.columnar.compression.PassThrough$;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.Platform;

/**
 * Writes the batches of a DataFrame cached with Spark's default cache format ({@link
 * DefaultCachedBatch}: per column a null list and a possibly compressed value buffer) into Arrow
 * vectors, without Spark's detour through a fresh on-heap column vector per batch:
 *
 * <ul>
 *   <li>the row count is summed over the partition's batches first (they are in memory), so every
 *       vector is allocated once at its final size;
 *   <li>a column stored uncompressed and without nulls (Spark's {@code PassThrough}, always the
 *       case for float and double columns without nulls) is one memory copy from the cached
 *       bytes into the Arrow buffer;
 *   <li>any other column is decoded by Spark's own {@code ColumnAccessor} into one reused on-heap
 *       vector, then copied ({@link PrimitiveColumns}).
 * </ul>
 *
 * Only for the types Spark itself reads from its cache as columnar batches: boolean, byte, short,
 * int, long, float, double ({@link #supports}). Produces the same buffers as Spark's field writers.
 */
final class CachedBatchColumns {
  private CachedBatchColumns() {}

  private static final int PASS_THROUGH = PassThrough$.MODULE$.typeId();

  /** True if every column of {@code schema} is of a type Spark decodes from its cache. */
  static boolean supports(StructType schema) {
    for (StructField f : schema.fields()) {
      DataType t = f.dataType();
      if (!(t instanceof BooleanType
          || t instanceof ByteType
          || t instanceof ShortType
          || t instanceof IntegerType
          || t instanceof LongType
          || t instanceof FloatType
          || t instanceof DoubleType)) {
        return false;
      }
    }
    return true;
  }

  /**
   * Writes {@code batches} into {@code root}'s vectors (freshly created, not allocated).
   *
   * @param columns for each field of {@code schema}, the index of its buffer in a cached batch
   * @return the number of rows written
   */
  static int write(
      Iterator<CachedBatch> batches, int[] columns, StructType schema, VectorSchemaRoot root) {
    List<DefaultCachedBatch> all = new ArrayList<>();
    long total = 0;
    int largest = 0;
    while (batches.hasNext()) {
      CachedBatch b = batches.next();
      if (!(b instanceof DefaultCachedBatch)) {
        throw new IllegalArgumentException(
            "cached batch of class " + b.getClass().getName() + "; expected DefaultCachedBatch");
      }
      DefaultCachedBatch d = (DefaultCachedBatch) b;
      all.add(d);
      total += d.numRows();
      largest = Math.max(largest, d.numRows());
    }
    if (total > Integer.MAX_VALUE) {
      throw new IllegalArgumentException(
          "partition exceeds 2^31-1 rows, the limit of one Arrow batch");
    }
    int rows = (int) total;
    List<FieldVector> targets = root.getFieldVectors();
    int numFields = targets.size();
    int[] kinds = new int[numFields];
    for (int c = 0; c < numFields; c++) {
      FieldVector v = targets.get(c);
      v.setInitialCapacity(Math.max(rows, 1));
      v.allocateNew();
      kinds[c] = PrimitiveColumns.kind(v);
    }
    OnHeapColumnVector[] scratch = new OnHeapColumnVector[numFields];
    try {
      int base = 0;
      for (DefaultCachedBatch batch : all) {
        int n = batch.numRows();
        if (n == 0) {
          continue;
        }
        byte[][] buffers = batch.buffers();
        for (int c = 0; c < numFields; c++) {
          BaseFixedWidthVector target = (BaseFixedWidthVector) targets.get(c);
          byte[] cached = buffers[columns[c]];
          if (!copyPassThrough(cached, target, base, n)) {
            if (scratch[c] == null) {
              scratch[c] = new OnHeapColumnVector(largest, schema.fields()[c].dataType());
            }
            OnHeapColumnVector cv = scratch[c];
            cv.reset();
            ColumnAccessor$.MODULE$.decompress(cached, cv, schema.fields()[c].dataType(), n);
            PrimitiveColumns.copy(kinds[c], target, cv, base, n);
          }
        }
        base += n;
      }
    } finally {
      for (OnHeapColumnVector v : scratch) {
        if (v != null) {
          v.close();
        }
      }
    }
    for (FieldVector v : targets) {
      v.setValueCount(rows);
    }
    root.setRowCount(rows);
    return rows;
  }

  /**
   * Copies a column stored as [null count 0][PassThrough id][n values] into rows [base, base + n)
   * of {@code target}; false (nothing written) for any other encoding.
   */
  private static boolean copyPassThrough(byte[] cached, BaseFixedWidthVector target, int base, int n) {
    int width = target.getTypeWidth();
    if (width == 0
        || cached.length != 8 + (long) n * width
        || ByteOrder.nativeOrder() != ByteOrder.LITTLE_ENDIAN) {
      return false; // bits, not the uncompressed layout, or not Arrow's byte order
    }
    ByteBuffer header = ByteBuffer.wrap(cached, 0, 8).order(ByteOrder.nativeOrder());
    if (header.getInt(0) != 0 || header.getInt(4) != PASS_THROUGH) {
      return false;
    }
    Platform.copyMemory(
        cached,
        Platform.BYTE_ARRAY_OFFSET + 8,
        null,
        target.getDataBufferAddress() + (long) base * width,
        (long) n * width);
    PrimitiveColumns.setValid(target.getValidityBufferAddress(), base, n);
    return true;
  }
}
