package io.npugather.spark;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.concat;
import static org.apache.spark.sql.functions.count;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.max;
import static org.apache.spark.sql.functions.min;
import static org.apache.spark.sql.functions.rand;
import static org.apache.spark.sql.functions.spark_partition_id;
import static org.apache.spark.sql.functions.sum;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.BiFunction;
import java.util.function.Function;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * Queries over a gathered result whose plans adaptive execution re-plans as their stages finish
 * (aggregations by partition and by columns, global aggregates, distinct, joins and unions after
 * the gather), over inputs that differ in what the planner sees under the gather (cached or not,
 * deterministic or not, more columns than the query reads). Each query's answer is computed in Java
 * from the input's partitions, so a query that plans wrongly, answers wrongly or never finishes
 * planning is caught.
 *
 * <p>Every input has the columns {@code id bigint, f0 float, f1 float}, possibly more; the
 * aggregates are exact (counts, sums of ids, minima and maxima), whatever the order of the rows.
 */
final class GatheredQueryFamily {
  private GatheredQueryFamily() {}

  /** An input of the family: its name and how to make it in a session. */
  record Input(String name, Function<SparkSession, Dataset<Row>> make, boolean cached) {
    Dataset<Row> in(SparkSession spark) {
      Dataset<Row> df = make.apply(spark);
      if (cached) {
        df = df.cache();
        df.count();
      }
      return df;
    }
  }

  /**
   * A query over the gathered result and its answer from the input's rows (rank-major, each {@code
   * source_rank, id, f0, f1, ...}) and the rank count, as rows of values.
   */
  record Query(
      String name,
      Function<Dataset<Row>, Dataset<Row>> over,
      BiFunction<List<Row>, Integer, List<List<Object>>> expected) {}

  private static final int ROWS = 1000;

  private static Dataset<Row> deterministic(SparkSession spark) {
    return spark
        .range(0, ROWS, 1, 2)
        .select(
            col("id"),
            col("id").mod(13).cast("float").as("f0"),
            col("id").multiply(7).mod(11).cast("float").as("f1"));
  }

  private static Dataset<Row> nondeterministic(SparkSession spark) {
    return spark
        .range(0, ROWS, 1, 2)
        .select(col("id"), rand(0).cast("float").as("f0"), rand(1).cast("float").as("f1"));
  }

  /** More columns than any query reads, one of them not of a fixed-width type. */
  private static Dataset<Row> wide(SparkSession spark) {
    return deterministic(spark)
        .withColumn("name", concat(lit("v"), col("id").cast("string")))
        .withColumn("f2", col("f0").multiply(2))
        .withColumn("n", col("id").cast("int"));
  }

  static List<Input> inputs() {
    return List.of(
        new Input("deterministic", GatheredQueryFamily::deterministic, false),
        new Input("nondeterministic", GatheredQueryFamily::nondeterministic, false),
        new Input("cached deterministic", GatheredQueryFamily::deterministic, true),
        new Input("cached nondeterministic", GatheredQueryFamily::nondeterministic, true),
        new Input("wide", GatheredQueryFamily::wide, false),
        new Input("cached wide", GatheredQueryFamily::wide, true));
  }

  private static long id(Row r) {
    return r.getLong(1);
  }

  private static float f0(Row r) {
    return r.getFloat(2);
  }

  private static float f1(Row r) {
    return r.getFloat(3);
  }

  static List<Query> queries() {
    return List.of(
        new Query(
            "grouped by spark_partition_id()",
            g ->
                g.groupBy(spark_partition_id().as("p"))
                    .agg(count(lit(1)), sum(col("id")), max(col("f0"))),
            (all, ranks) -> {
              List<List<Object>> rows = new ArrayList<>();
              for (int p = 0; p < ranks; p++) {
                rows.add(
                    List.of(
                        p,
                        (long) all.size(),
                        all.stream().mapToLong(GatheredQueryFamily::id).sum(),
                        maxOf(all, GatheredQueryFamily::f0)));
              }
              return rows;
            }),
        new Query(
            "grouped by source_rank",
            g -> g.groupBy(col("source_rank")).agg(count(lit(1)), min(col("f1"))),
            (all, ranks) ->
                grouped(
                    all,
                    r -> r.getInt(0),
                    rows -> List.of((long) ranks * rows.size(), -maxOf(rows, r -> -f1(r))))),
        new Query(
            "grouped by a column expression",
            g ->
                g.groupBy(col("id").mod(7).as("k"))
                    .agg(count(lit(1)), sum(col("id")), max(col("f0"))),
            (all, ranks) ->
                grouped(
                    all,
                    r -> id(r) % 7,
                    rows ->
                        List.of(
                            (long) ranks * rows.size(),
                            ranks * rows.stream().mapToLong(GatheredQueryFamily::id).sum(),
                            maxOf(rows, GatheredQueryFamily::f0)))),
        new Query(
            "global aggregate",
            g -> g.agg(count(lit(1)), sum(col("id")), max(col("f1"))),
            (all, ranks) ->
                List.of(
                    List.of(
                        (long) ranks * all.size(),
                        ranks * all.stream().mapToLong(GatheredQueryFamily::id).sum(),
                        maxOf(all, GatheredQueryFamily::f1)))),
        new Query(
            "distinct rows of two columns",
            g -> g.select(col("id"), col("f0")).distinct().agg(count(lit(1))),
            (all, ranks) -> List.of(List.of((long) all.size()))),
        new Query(
            "every id as often as there are ranks",
            g ->
                g.groupBy(col("id"))
                    .agg(count(lit(1)).as("c"))
                    .groupBy(col("c"))
                    .agg(count(lit(1))),
            (all, ranks) -> List.of(List.of((long) ranks, (long) all.size()))),
        new Query(
            "joined with a dimension table, then aggregated",
            g -> {
              Dataset<Row> labels =
                  g.sparkSession()
                      .range(0, 5)
                      .select(col("id").as("k"), col("id").multiply(10).as("label"));
              return g.join(labels, col("id").mod(5).equalTo(col("k")))
                  .groupBy(col("label"))
                  .agg(count(lit(1)), max(col("f0")));
            },
            (all, ranks) ->
                grouped(
                    all,
                    r -> 10 * (id(r) % 5),
                    rows ->
                        List.of((long) ranks * rows.size(), maxOf(rows, GatheredQueryFamily::f0)))),
        new Query(
            "joined with its own input",
            g -> {
              Column sourceId = col("id");
              return g.join(
                      g.select(sourceId.as("other"), col("f1").as("f1_other")).distinct(),
                      sourceId.equalTo(col("other")))
                  .groupBy(col("source_rank"))
                  .agg(count(lit(1)));
            },
            (all, ranks) ->
                grouped(all, r -> r.getInt(0), rows -> List.of((long) ranks * rows.size()))),
        new Query(
            "a union of two gathers, aggregated",
            g -> g.union(g).groupBy(col("source_rank")).agg(count(lit(1)), sum(col("id"))),
            (all, ranks) ->
                grouped(
                    all,
                    r -> r.getInt(0),
                    rows ->
                        List.of(
                            2L * ranks * rows.size(),
                            2L * ranks * rows.stream().mapToLong(GatheredQueryFamily::id).sum()))));
  }

  /** The query's rows as values, in a fixed order. */
  static List<List<Object>> answer(Dataset<Row> result) {
    List<List<Object>> rows = new ArrayList<>();
    for (Row row : result.collectAsList()) {
      List<Object> values = new ArrayList<>();
      for (int i = 0; i < row.size(); i++) {
        values.add(row.get(i));
      }
      rows.add(values);
    }
    return sorted(rows);
  }

  static List<List<Object>> sorted(List<List<Object>> rows) {
    List<List<Object>> copy = new ArrayList<>(rows);
    copy.sort(Comparator.comparing(Object::toString));
    return copy;
  }

  private static float maxOf(List<Row> rows, Function<Row, Float> value) {
    float max = Float.NEGATIVE_INFINITY;
    for (Row r : rows) {
      max = Math.max(max, value.apply(r));
    }
    return max;
  }

  /** One row per key: the key, then what {@code values} makes of the key's rows. */
  private static <K extends Comparable<K>> List<List<Object>> grouped(
      List<Row> all, Function<Row, K> key, Function<List<Row>, List<Object>> values) {
    Map<K, List<Row>> byKey = new TreeMap<>();
    for (Row r : all) {
      byKey.computeIfAbsent(key.apply(r), k -> new ArrayList<>()).add(r);
    }
    List<List<Object>> rows = new ArrayList<>();
    byKey.forEach(
        (k, rowsOfKey) -> {
          List<Object> row = new ArrayList<>();
          row.add(k);
          row.addAll(values.apply(rowsOfKey));
          rows.add(row);
        });
    return rows;
  }
}
