package io.npugather.spark.arrow.write;

import io.npugather.spark.arrow.ArrowBackedColumn;
import io.npugather.spark.arrow.FixedWidthType;
import java.util.Iterator;
import java.util.List;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.ValueVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.compare.TypeEqualsVisitor;
import org.apache.arrow.vector.complex.ListVector;
import org.apache.arrow.vector.util.VectorAppender;
import org.apache.spark.sql.execution.arrow.ArrowFieldWriter;
import org.apache.spark.sql.execution.arrow.ArrowWriter$;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Writes columnar batches into Arrow vectors column by column, without materializing rows: a column
 * backed by an Arrow vector of exactly the expected Arrow type is appended buffer-wise (bulk
 * copies); a fixed-width column ({@link FixedWidthType}) of any other vector class is copied in a
 * tight typed loop or in bulk ({@link PrimitiveColumns}), an array column of fixed-width elements
 * likewise, its elements in bulk ({@link ArrayColumns}); any other column is written value by value
 * with Spark's Arrow field writers.
 */
final class ColumnarBatchWriter {
  private ColumnarBatchWriter() {}

  /**
   * Writes {@code batches} of {@code schema} into {@code root}'s vectors (created, not allocated).
   */
  static void write(
      Iterator<ColumnarBatch> batches,
      StructType schema,
      VectorSchemaRoot root,
      BufferAllocator allocator) {
    int numFields = schema.fields().length;
    List<FieldVector> targets = root.getFieldVectors();
    ArrowFieldWriter[] writers = new ArrowFieldWriter[numFields];
    for (int c = 0; c < numFields; c++) {
      FieldVector v = targets.get(c);
      v.allocateNew();
      writers[c] = ArrowWriter$.MODULE$.createFieldWriter(v);
    }
    ColumnAppender[] appenders = new ColumnAppender[numFields];
    boolean[] arrays = new boolean[numFields];
    long total;
    try {
      total = writeBatches(batches, schema, targets, writers, appenders, arrays, allocator);
    } finally {
      for (ColumnAppender a : appenders) {
        if (a != null) {
          a.close();
        }
      }
    }
    for (int c = 0; c < numFields; c++) {
      if (arrays[c]) {
        ArrayColumns.finish((ListVector) targets.get(c), writers[c].count());
      } else if (appenders[c] == null) {
        writers[c].finish();
      } else {
        // Not the writer's finish(): its nested child writers never ran and would reset the
        // children's value counts. The vector derives its children's counts itself.
        targets.get(c).setValueCount(writers[c].count());
      }
    }
    root.setRowCount((int) total);
  }

  private static long writeBatches(
      Iterator<ColumnarBatch> batches,
      StructType schema,
      List<FieldVector> targets,
      ArrowFieldWriter[] writers,
      ColumnAppender[] appenders,
      boolean[] arrays,
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
        FixedWidthType type;
        if (appenders[c] != null) {
          appenders[c].append(cv, n, w);
        } else if ((type = FixedWidthType.of(targets.get(c))) != null) {
          PrimitiveColumns.copy(type, targets.get(c), cv, w.count(), n);
          w.count_$eq(w.count() + n);
        } else if ((type = ArrayColumns.elementType(targets.get(c))) != null) {
          // Every batch of the column, so its field writer never writes a row.
          arrays[c] = true;
          ArrayColumns.copy(type, (ListVector) targets.get(c), cv, w.count(), n);
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
    } else if (cv instanceof ArrowBackedColumn) {
      return ((ArrowBackedColumn) cv).getValueVector();
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
}
