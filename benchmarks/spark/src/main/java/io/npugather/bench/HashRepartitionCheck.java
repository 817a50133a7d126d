package io.npugather.bench;

import static org.apache.spark.sql.functions.col;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;

/**
 * Shows why the obvious shuffle replication is wrong: cross join with {@code range(N)} as {@code
 * target}, then {@code repartition(N, col("target"))}. Hash partitioning sends target t to
 * partition {@code pmod(murmur3(t), N)}, and for small N two targets often land in the same
 * partition, leaving another one empty: the job succeeds, the result is silently wrong.
 */
final class HashRepartitionCheck {
  private HashRepartitionCheck() {}

  /** Rows in each partition of the hash-partitioned replication. */
  static List<Long> rowsPerPartition(BenchInput input) {
    Dataset<Row> targets = input.spark().range(input.ranks()).toDF("target");
    Dataset<Row> replicated =
        input.data().crossJoin(targets).repartition(input.ranks(), col("target"));
    List<long[]> counts =
        replicated
            .queryExecution()
            .toRdd()
            .toJavaRDD()
            .mapPartitionsWithIndex(
                (partition, rows) -> {
                  long n = 0;
                  while (rows.hasNext()) {
                    rows.next();
                    n++;
                  }
                  return List.of(new long[] {partition, n}).iterator();
                },
                false)
            .collect();
    List<Long> result = new ArrayList<>();
    for (long[] c : counts) {
      result.add(c[1]);
    }
    return result;
  }

  /** One line for the report: the counts and whether they are what a replication needs. */
  static String describe(BenchInput input, List<Long> rowsPerPartition) {
    long expected = input.ranks() * input.rowsPerPartition();
    boolean right = rowsPerPartition.stream().allMatch(n -> n == expected);
    return String.format(
        "repartition(%d, col(\"target\")) after a cross join with range(%d):"
            + " rows per partition %s, each should hold %d: %s",
        input.ranks(),
        input.ranks(),
        rowsPerPartition,
        expected,
        right
            ? "right (no collision at this N)"
            : "WRONG (targets collide under hash partitioning)");
  }
}
