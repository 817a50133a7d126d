package io.npugather.examples;

import static org.apache.spark.sql.functions.asc;
import static org.apache.spark.sql.functions.broadcast;
import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.desc;
import static org.apache.spark.sql.functions.row_number;
import static org.apache.spark.sql.functions.udf;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.expressions.Window;
import org.apache.spark.sql.types.DataTypes;
import scala.collection.Seq;

/**
 * The example's check: the same top-k computed with plain Spark SQL (a cross join with every item,
 * a dot-product UDF, a window rank) for a sample of queries, compared with the job's.
 */
final class PlainSparkCheck {
  private PlainSparkCheck() {}

  /**
   * Plain Spark SQL's top-k for the sampled queries, compared with the job's output: the same item
   * ids in the same order and the same scores (within 1e-5 relative). Returns the number of
   * matching queries and describes the others in {@code mismatches}.
   */
  static int check(
      Dataset<Row> items,
      Dataset<Row> queries,
      Dataset<Row> sampleIds,
      Dataset<Row> recommendations,
      int k,
      List<String> mismatches) {
    Dataset<Row> sampled =
        queries
            .join(broadcast(sampleIds), "id")
            .select(col("id").as("query_id"), col("embedding").as("q"));
    Dataset<Row> expected =
        sampled
            .crossJoin(items.select(col("id").as("item_id"), col("embedding").as("e")))
            .select(
                col("query_id"),
                col("item_id"),
                udf(DOT, DataTypes.FloatType).apply(col("q"), col("e")).as("score"))
            .withColumn(
                "rank",
                row_number()
                    .over(Window.partitionBy("query_id").orderBy(desc("score"), asc("item_id"))))
            .where(col("rank").leq(k));
    Map<Long, List<Row>> want = byQuery(expected.collectAsList());
    Map<Long, List<Row>> got =
        byQuery(
            recommendations
                .join(broadcast(sampleIds.withColumnRenamed("id", "query_id")), "query_id")
                .select("query_id", "item_id", "score", "rank")
                .collectAsList());
    int matching = 0;
    for (Map.Entry<Long, List<Row>> entry : want.entrySet()) {
      String problem = compare(entry.getValue(), got.getOrDefault(entry.getKey(), List.of()));
      if (problem == null) {
        matching++;
      } else {
        mismatches.add("query " + entry.getKey() + ": " + problem);
      }
    }
    return matching;
  }

  /** The dot product as a Spark UDF: a float sum in dimension order. */
  static final UDF2<Seq<Float>, Seq<Float>, Float> DOT =
      (q, e) -> {
        int n = q.length();
        if (e.length() != n) {
          throw new IllegalArgumentException("embeddings of " + n + " and " + e.length() + " dims");
        }
        float sum = 0f;
        for (int j = 0; j < n; j++) {
          sum += q.apply(j) * e.apply(j);
        }
        return sum;
      };

  private static Map<Long, List<Row>> byQuery(List<Row> rows) {
    Map<Long, List<Row>> map = new HashMap<>();
    for (Row row : rows) {
      map.computeIfAbsent(row.getLong(0), q -> new ArrayList<>()).add(row);
    }
    for (List<Row> list : map.values()) {
      list.sort((a, b) -> Integer.compare(a.getInt(3), b.getInt(3)));
    }
    return map;
  }

  private static String compare(List<Row> want, List<Row> got) {
    if (want.size() != got.size()) {
      return "plain Spark has " + want.size() + " recommendations, the job " + got.size();
    }
    for (int i = 0; i < want.size(); i++) {
      Row w = want.get(i);
      Row g = got.get(i);
      float ws = w.getFloat(2);
      float gs = g.getFloat(2);
      if (w.getLong(1) != g.getLong(1)
          || w.getInt(3) != g.getInt(3)
          || Math.abs(ws - gs) > 1e-5f * Math.max(1f, Math.abs(ws))) {
        return String.format(
            Locale.ROOT,
            "rank %d: plain Spark item %d score %s, the job item" + " %d score %s",
            i + 1,
            w.getLong(1),
            ws,
            g.getLong(1),
            gs);
      }
    }
    return null;
  }
}
