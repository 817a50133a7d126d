package io.npugather.spark;

import io.npugather.AllGatherOperation;
import io.npugather.AllGatherParam;
import io.npugather.Communicator;
import io.npugather.DType;
import io.npugather.HalfFloats;
import io.npugather.NpuGatherException;
import io.npugather.ResultCode;
import io.npugather.Tensor;
import io.npugather.spark.arrow.FixedWidthType;
import java.io.Serializable;
import java.util.Collections;
import java.util.Iterator;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One rank of an {@link NpuGather#onRanks} run, inside a barrier task: the partition's rows to a
 * float32 tensor {@code [rows, features]} (narrowed to the wire dtype), one rendezvous round, the
 * all-gather through {@link AllGatherOperation}, then the user's {@link RankFunction} on the
 * gathered tensor. Everything comes from one child allocator, released before the task returns.
 */
final class OnRanksTask<T> implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final Logger LOG = LoggerFactory.getLogger(OnRanksTask.class);
  private static final int INITIAL_FLOATS = 4096;

  private final StructType schema;
  private final DType wireDtype;
  private final RankFunction<T> fn;
  private final RankTask ranks;

  /** {@code schema} and {@code wireDtype} as the call checked them ({@link OnRanksStage}). */
  OnRanksTask(StructType schema, DType wireDtype, RankFunction<T> fn, RankTask ranks) {
    this.schema = schema;
    this.wireDtype = wireDtype;
    this.fn = fn;
    this.ranks = ranks;
  }

  /** The dtypes a run may send: float32, or float32 narrowed to float16 or bfloat16. */
  static DType checkWireDtype(DType wireDtype) {
    if (wireDtype != DType.FLOAT32 && wireDtype != DType.FLOAT16 && wireDtype != DType.BFLOAT16) {
      throw new IllegalArgumentException(
          "wire dtype " + wireDtype + " is not supported; allowed: float32, float16, bfloat16");
    }
    return wireDtype;
  }

  /**
   * Checks the selected columns: numeric columns (float, double, int, bigint, smallint, tinyint),
   * or one {@code array<float>} column.
   */
  static StructType checkInput(StructType schema) {
    StructField[] fields = schema.fields();
    if (fields.length == 0) {
      throw new IllegalArgumentException(
          "onRanks: columns is empty; allowed: numeric columns"
              + " (float, double, int, bigint, smallint, tinyint) or one array<float> column");
    }
    for (StructField field : fields) {
      DataType type = field.dataType();
      if (isFloatArray(type)) {
        if (fields.length != 1) {
          throw new IllegalArgumentException(
              "onRanks: column '"
                  + field.name()
                  + "' is "
                  + type.simpleString()
                  + ", which must be the only selected column (got "
                  + fields.length
                  + " columns)");
        }
      } else if (!isNumeric(type)) {
        throw new IllegalArgumentException(
            "onRanks: column '"
                + field.name()
                + "' is "
                + type.simpleString()
                + "; allowed: float, double, int, bigint, smallint, tinyint,"
                + " or a single array<float> column");
      }
    }
    return schema;
  }

  private static boolean isFloatArray(DataType type) {
    return type instanceof ArrayType array && array.elementType() instanceof FloatType;
  }

  private static boolean isNumeric(DataType type) {
    return type instanceof FloatType
        || type instanceof DoubleType
        || type instanceof IntegerType
        || type instanceof LongType
        || type instanceof ShortType
        || type instanceof ByteType;
  }

  /** Runs this rank; the iterator holds the function's single result. */
  Iterator<Object> run(Iterator<InternalRow> rows) {
    RankTask.Rank me = ranks.start();
    int rank = me.rank();
    int rankSize = me.rankSize();
    String where = me.where();
    BufferAllocator allocator = me.allocator();
    Tensor x = null;
    Tensor gathered = null;
    Throwable failure = null;
    try {
      x = readPartition(rows, allocator, where);
      if (wireDtype != DType.FLOAT32) {
        Tensor narrow = HalfFloats.fromFloat32(x, wireDtype, allocator);
        x.close();
        x = narrow;
      }
      me.conversionDone();

      me.meet(new byte[0]);
      me.rendezvousDone();
      Communicator communicator = me.connect();
      AllGatherOptions options = ranks.options();
      AllGatherParam param =
          AllGatherParam.builder()
              .backend(options.backend())
              .rank(rank)
              .rankSize(rankSize)
              .rankRoot(options.rankRoot())
              .communicator(communicator)
              .build();
      try {
        gathered = new AllGatherOperation(param).execute(communicator, x, allocator);
      } catch (NpuGatherException e) {
        if (e.code() == ResultCode.INVALID_USAGE && "AllGatherOperation".equals(e.operation())) {
          // Every rank fails the same way here (different shapes, or a rank that rejected its
          // own input, e.g. an output beyond its memory): no abort, which would blur the peers'
          // errors.
          me.closeGroup();
          String hint =
              e.getMessage().contains("ranks passed different inputs")
                  ? ". onRanks needs the same number of rows (and features) in every partition:"
                      + " repartition the input so that every rank holds an equal share"
                  : "";
          throw new IllegalStateException(where + ": " + e.getMessage() + hint, e);
        }
        throw e;
      }
      me.closeGroup(); // the communicator's job is done; the function may run long
      long bytes = x.byteSize();
      x.close();
      x = null;
      long[] shape = gathered.shape();
      me.collectiveDone(bytes * (rankSize - 1), bytes * (rankSize - 1), shape[0] * shape[1]);
      LOG.info("{}: gathered {}; {}", where, gathered, me.timings());

      T result;
      try {
        result = fn.apply(rank, gathered);
      } catch (Exception e) {
        throw new RankFunctionException(where + ": the rank function failed: " + e, e);
      }
      return Collections.singletonList((Object) result).iterator();
    } catch (RuntimeException | Error e) {
      failure = e;
      me.abort(); // no-op once closed; otherwise the peers fail at once
      me.yieldToPeersFailure(e);
      throw e;
    } finally {
      Throwable first = me.release(failure, gathered, x);
      if (failure == null && first != null) {
        throw new IllegalStateException(
            where
                + ": releasing the task's memory failed (did the"
                + " rank function close the gathered tensor, or keep a reference to it?)",
            first);
      }
    }
  }

  /** The partition as float32 {@code [rows, features]}, from {@code allocator}. */
  private Tensor readPartition(
      Iterator<InternalRow> rows, BufferAllocator allocator, String where) {
    FloatRows out = new FloatRows(allocator);
    try {
      if (isFloatArray(schema.fields()[0].dataType())) {
        readArrayColumn(rows, out, where);
      } else {
        readNumericColumns(rows, out, where);
      }
      return out.toTensor();
    } catch (RuntimeException | Error e) {
      out.close();
      throw e;
    }
  }

  private void readNumericColumns(Iterator<InternalRow> rows, FloatRows out, String where) {
    StructField[] fields = schema.fields();
    int features = fields.length;
    FixedWidthType[] types = new FixedWidthType[features];
    for (int j = 0; j < features; j++) {
      types[j] = FixedWidthType.of(fields[j].dataType());
    }
    out.features = features;
    long row = 0;
    while (rows.hasNext()) {
      InternalRow r = rows.next();
      out.ensure(features);
      for (int j = 0; j < features; j++) {
        if (r.isNullAt(j)) {
          throw new IllegalArgumentException(
              where
                  + ": column '"
                  + fields[j].name()
                  + "' is null"
                  + " in row "
                  + row
                  + " of this partition; onRanks needs a value in every row");
        }
        out.put(
            j,
            switch (types[j]) {
              case FLOAT -> r.getFloat(j);
              case DOUBLE -> (float) r.getDouble(j);
              case INT -> (float) r.getInt(j);
              case LONG -> (float) r.getLong(j);
              case SHORT -> r.getShort(j);
              default -> r.getByte(j);
            });
      }
      out.endRow();
      row++;
    }
  }

  private void readArrayColumn(Iterator<InternalRow> rows, FloatRows out, String where) {
    String column = schema.fields()[0].name();
    long row = 0;
    while (rows.hasNext()) {
      InternalRow r = rows.next();
      if (r.isNullAt(0)) {
        throw new IllegalArgumentException(
            where
                + ": column '"
                + column
                + "' is null in row "
                + row
                + " of this partition; onRanks needs an array in every row");
      }
      ArrayData values = r.getArray(0);
      int length = values.numElements();
      if (row == 0) {
        out.features = length;
      } else if (length != out.features) {
        throw new IllegalArgumentException(
            where
                + ": column '"
                + column
                + "' has "
                + length
                + " elements in row "
                + row
                + " of this partition but "
                + out.features
                + " in row 0; every row of an array<float> column must have the same length");
      }
      out.ensure(length);
      for (int j = 0; j < length; j++) {
        if (values.isNullAt(j)) {
          throw new IllegalArgumentException(
              where
                  + ": column '"
                  + column
                  + "' has a null"
                  + " element at index "
                  + j
                  + " in row "
                  + row
                  + " of this partition; onRanks"
                  + " needs a value in every element");
        }
        out.put(j, values.getFloat(j));
      }
      out.endRow();
      row++;
    }
  }

  /** float32 rows appended to a growing Arrow buffer. */
  private static final class FloatRows {
    private final BufferAllocator allocator;
    private ArrowBuf buffer;
    private long capacity; // floats
    private long written; // floats of complete rows
    private long rows;
    int features;

    FloatRows(BufferAllocator allocator) {
      this.allocator = allocator;
    }

    /** Room for {@code floats} more after the complete rows. */
    void ensure(int floats) {
      long needed = Math.addExact(written, floats);
      if (buffer != null && needed <= capacity) {
        return;
      }
      long grown = Math.max(needed, Math.max(INITIAL_FLOATS, Math.multiplyExact(capacity, 2)));
      ArrowBuf next = allocator.buffer(Math.multiplyExact(grown, 4L));
      if (buffer != null) {
        next.setBytes(0, buffer, 0, written * 4);
        buffer.close();
      }
      buffer = next;
      capacity = grown;
    }

    void put(int index, float value) {
      buffer.setFloat((written + index) * 4, value);
    }

    void endRow() {
      written += features;
      rows++;
    }

    /** The rows as a tensor, which takes over the buffer. */
    Tensor toTensor() {
      if (buffer == null) {
        buffer = allocator.buffer(0);
      }
      ArrowBuf taken = buffer;
      buffer = null;
      try {
        return Tensor.wrap(taken, DType.FLOAT32, rows, features);
      } catch (RuntimeException e) {
        taken.close();
        throw e;
      }
    }

    void close() {
      if (buffer != null) {
        buffer.close();
        buffer = null;
      }
    }
  }
}
