package io.npugather.examples;

import static org.apache.spark.sql.functions.col;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * The job's scoring as one SQL query ({@code --scoring sql}): the queries joined with every item by
 * the {@code ALLGATHER} hint — every executor gathers the item table once and builds it once, the
 * queries are joined where they lie — the dot product as SQL's higher-order functions (a float sum
 * in dimension order, the same floats as the arrays' scoring) and the top-k by a window. The
 * queries are spread by id first, so the window finds each query's pairs in one task and nothing
 * else is shuffled.
 */
final class SqlScoring {
  private SqlScoring() {}

  static final String QUERY =
      """
      SELECT query_id, item_id, score, rank FROM (
        SELECT query_id, item_id, score,
               row_number() OVER (PARTITION BY query_id ORDER BY score DESC, item_id) AS rank
        FROM (
          SELECT /*+ ALLGATHER(i) */ q.id AS query_id, i.id AS item_id,
                 aggregate(zip_with(q.embedding, i.embedding, (x, y) -> x * y),
                           CAST(0 AS FLOAT), (acc, v) -> acc + v) AS score
          FROM feature_sharding_queries q CROSS JOIN feature_sharding_items i))
      WHERE rank <= %d""";

  /**
   * The top {@code k} items of every query, {@code (query_id, item_id, score, rank)}; needs the SQL
   * extension in {@code spark}.
   */
  static Dataset<Row> recommendations(
      SparkSession spark, Dataset<Row> items, Dataset<Row> queries, int k) {
    items.createOrReplaceTempView("feature_sharding_items");
    queries.repartition(col("id")).createOrReplaceTempView("feature_sharding_queries");
    return spark.sql(String.format(QUERY, k));
  }
}
