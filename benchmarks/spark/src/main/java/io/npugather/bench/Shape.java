package io.npugather.bench;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.expr;
import static org.apache.spark.sql.functions.struct;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;

/**
 * The row layouts the benchmark gathers: {@code id bigint} and either 16 {@code float} columns, one
 * {@code array<float>} feature vector of 64 elements, or a string and a struct of two floats and a
 * string (the layouts that do not take the fixed-width paths). Values are pseudo-random (a hash of
 * the id and the column), so a cached partition recomputed after eviction is the same.
 *
 * <p>Every method reduces its output to a {@link RowHash} per row, read through the accessor that
 * method's data arrives in (Spark's internal rows, external rows, or the benchmark's own byte
 * encoding); the sum over a partition is its checksum.
 */
enum Shape {
  FLOATS("floats", 16),
  VECTOR("vector", 64),
  MIXED("mixed", 2);

  private final String label;
  private final int floats;

  Shape(String label, int floats) {
    this.label = label;
    this.floats = floats;
  }

  static Shape parse(String label) {
    for (Shape shape : values()) {
      if (shape.label.equals(label.trim().toLowerCase(Locale.ROOT))) {
        return shape;
      }
    }
    throw new IllegalArgumentException(
        "--shapes: unknown shape '"
            + label
            + "'; allowed: floats (id + 16 float columns), vector (id + array<float> of 64), mixed"
            + " (id + string + struct<x float, y float, label string>)");
  }

  String label() {
    return label;
  }

  /** The column types, as the table shows them. */
  String describe() {
    return switch (this) {
      case FLOATS -> "id bigint + 16 x float";
      case VECTOR -> "id bigint + array<float>[64]";
      case MIXED -> "id bigint + string + struct<float, float, string>";
    };
  }

  /**
   * Payload bytes of one row: the id and the floats (and the vector's int offset; for mixed, the
   * strings' 16 bytes on average and their offsets).
   */
  int bytesPerRow() {
    return 8 + 4 * floats + (this == VECTOR ? 4 : 0) + (this == MIXED ? 24 : 0);
  }

  /** {@code ranks} partitions of {@code rowsPerPartition} rows each, ids 0..n-1. */
  Dataset<Row> generate(SparkSession spark, int ranks, long rowsPerPartition) {
    Dataset<Row> ids = spark.range(0, ranks * rowsPerPartition, 1, ranks).toDF("id");
    // A float in [-1, 1) from a 32-bit hash of (id, column).
    String value = "cast(hash(id, %s) as float) * cast(4.656613e-10 as float)";
    if (this == MIXED) {
      return ids.select(
          col("id"),
          expr("concat('item-', id, '-', substr(sha1(cast(id as string)), 1, cast(id % 9 as int)))")
              .as("name"),
          struct(
                  expr(String.format(value, 0)).as("x"),
                  expr(String.format(value, 1)).as("y"),
                  expr("concat('L', id % 97)").as("label"))
              .as("point"));
    }
    if (this == FLOATS) {
      List<Column> columns = new ArrayList<>();
      columns.add(col("id"));
      for (int i = 0; i < floats; i++) {
        columns.add(expr(String.format(value, i)).as("f" + i));
      }
      return ids.select(columns.toArray(new Column[0]));
    }
    return ids.select(
        col("id"),
        expr("transform(sequence(0, " + (floats - 1) + "), i -> " + String.format(value, "i") + ")")
            .as("features"));
  }

  /**
   * The hash of an internal row whose id is at {@code idOrdinal}, the floats after it (for mixed:
   * the struct's floats, then the strings' bytes).
   */
  long hash(InternalRow row, int idOrdinal) {
    long h = RowHash.start(row.getLong(idOrdinal));
    if (this == MIXED) {
      InternalRow point = row.getStruct(idOrdinal + 2, 3);
      h = RowHash.add(h, point.getFloat(0));
      h = RowHash.add(h, point.getFloat(1));
      h = RowHash.add(h, row.getUTF8String(idOrdinal + 1).getBytes());
      return RowHash.finish(RowHash.add(h, point.getUTF8String(2).getBytes()));
    }
    if (this == FLOATS) {
      for (int i = 1; i <= floats; i++) {
        h = RowHash.add(h, row.getFloat(idOrdinal + i));
      }
    } else {
      ArrayData vector = row.getArray(idOrdinal + 1);
      int n = vector.numElements();
      for (int i = 0; i < n; i++) {
        h = RowHash.add(h, vector.getFloat(i));
      }
    }
    return RowHash.finish(h);
  }

  /** The hash of an external row (id first). */
  long hash(Row row) {
    long h = RowHash.start(row.getLong(0));
    if (this == MIXED) {
      Row point = row.getStruct(2);
      h = RowHash.add(h, point.getFloat(0));
      h = RowHash.add(h, point.getFloat(1));
      h = RowHash.add(h, row.getString(1).getBytes(StandardCharsets.UTF_8));
      return RowHash.finish(RowHash.add(h, point.getString(2).getBytes(StandardCharsets.UTF_8)));
    }
    if (this == FLOATS) {
      for (int i = 1; i <= floats; i++) {
        h = RowHash.add(h, row.getFloat(i));
      }
    } else {
      List<Float> vector = row.getList(1);
      for (Float v : vector) {
        h = RowHash.add(h, v);
      }
    }
    return RowHash.finish(h);
  }

  /**
   * Appends the row (id at {@code idOrdinal}) to {@code out}: the id, the count, the floats, the
   * count of strings and each string's length and bytes.
   */
  void write(InternalRow row, int idOrdinal, GrowableBuffer out) {
    if (this == MIXED) {
      InternalRow point = row.getStruct(idOrdinal + 2, 3);
      byte[] name = row.getUTF8String(idOrdinal + 1).getBytes();
      byte[] label = point.getUTF8String(2).getBytes();
      ByteBuffer b = out.reserve(8 + 4 + 8 + 4 + 8 + name.length + label.length);
      b.putLong(row.getLong(idOrdinal))
          .putInt(2)
          .putFloat(point.getFloat(0))
          .putFloat(point.getFloat(1))
          .putInt(2);
      b.putInt(name.length).put(name).putInt(label.length).put(label);
      return;
    }
    ByteBuffer b = out.reserve(bytesPerRow() + 8);
    b.putLong(row.getLong(idOrdinal));
    if (this == FLOATS) {
      b.putInt(floats);
      for (int i = 1; i <= floats; i++) {
        b.putFloat(row.getFloat(idOrdinal + i));
      }
    } else {
      ArrayData vector = row.getArray(idOrdinal + 1);
      int n = vector.numElements();
      if (n != floats) {
        b = out.reserve(8 + 4 + 4 * n);
      }
      b.putInt(n);
      for (int i = 0; i < n; i++) {
        b.putFloat(vector.getFloat(i));
      }
    }
    b.putInt(0);
  }

  /** Reads one row that {@link #write} wrote and returns its hash. */
  static long readHash(ByteBuffer in) {
    long h = RowHash.start(in.getLong());
    int n = in.getInt();
    for (int i = 0; i < n; i++) {
      h = RowHash.add(h, in.getFloat());
    }
    for (int strings = in.getInt(); strings > 0; strings--) {
      byte[] bytes = new byte[in.getInt()];
      in.get(bytes);
      h = RowHash.add(h, bytes);
    }
    return RowHash.finish(h);
  }
}
