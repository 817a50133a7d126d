package io.npugather.spark.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;

/**
 * What an all-gather must give every rank: the input's partitions one after the other in rank order
 * (rank-major), and the checks that every rank got exactly that, row by row and value by value
 * (binary values byte by byte, floats bit by bit).
 */
public final class RankMajor {
  private RankMajor() {}

  /** The partitions of {@code df}, in partition (= rank) order, each with its rows in order. */
  public static List<List<Row>> partitions(Dataset<Row> df) {
    return df.javaRDD().glom().collect();
  }

  /** What every output partition of a gather holds: r + each row of input partition r, for r. */
  public static List<Row> rows(List<List<Row>> in) {
    List<Row> rows = new ArrayList<>();
    for (int r = 0; r < in.size(); r++) {
      for (Row row : in.get(r)) {
        Object[] values = new Object[row.size() + 1];
        values[0] = r;
        for (int i = 0; i < row.size(); i++) {
          values[i + 1] = row.get(i);
        }
        rows.add(RowFactory.create(values));
      }
    }
    return rows;
  }

  /** {@link #rows(List)} of the partitions of {@code input}. */
  public static List<Row> rows(Dataset<Row> input) {
    return rows(partitions(input));
  }

  /**
   * Every output partition holds {@link #rows(List) the rank-major rows} of {@code in}, row by row;
   * one output partition per input partition. {@code in} and {@code out} are partitions (glom).
   */
  public static void assertOnEveryPartition(List<List<Row>> in, List<List<Row>> out) {
    assertEquals(in.size(), out.size(), "one output partition per rank");
    List<Row> expected = rows(in);
    for (int p = 0; p < out.size(); p++) {
      List<Row> got = out.get(p);
      assertEquals(expected.size(), got.size(), "rows on output partition " + p);
      for (int i = 0; i < expected.size(); i++) {
        assertEquals(expected.get(i), got.get(i), "output partition " + p + ", row " + i);
      }
    }
  }

  /** {@link #assertOnEveryPartition(List, List)} of a gather's input and output DataFrames. */
  public static void assertOnEveryPartition(Dataset<Row> input, Dataset<Row> output) {
    assertOnEveryPartition(partitions(input), partitions(output));
  }

  /**
   * The float32 tensor {@code onRanks} gathers of {@code columns}: for each partition in rank
   * order, each row's values of the columns in the order given (an array column gives its
   * elements).
   */
  public static float[] floats(Dataset<Row> df, List<String> columns) {
    List<Float> values = new ArrayList<>();
    for (List<Row> partition : partitions(df)) {
      for (Row row : partition) {
        for (String column : columns) {
          Object value = row.get(row.fieldIndex(column));
          if (value instanceof List<?> list) {
            list.forEach(v -> values.add((Float) v));
          } else if (value instanceof scala.collection.Seq<?> seq) {
            scala.jdk.javaapi.CollectionConverters.asJava(seq).forEach(v -> values.add((Float) v));
          } else {
            values.add(((Number) value).floatValue());
          }
        }
      }
    }
    float[] out = new float[values.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = values.get(i);
    }
    return out;
  }

  /** Rank {@code rank} got {@code expected}, bit for bit (NaN payloads and -0.0 included). */
  public static void assertSameFloats(int rank, float[] expected, float[] got) {
    assertEquals(expected.length, got.length, "elements on rank " + rank);
    for (int i = 0; i < expected.length; i++) {
      assertEquals(
          Float.floatToRawIntBits(expected[i]),
          Float.floatToRawIntBits(got[i]),
          "rank " + rank + ", element " + i + ": expected " + expected[i] + ", got " + got[i]);
    }
  }
}
