package io.npugather.bench;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.Row;

/**
 * Today's usual way: {@code df.collect()} to the driver, {@code sc.broadcast(rows)}, and one task
 * per rank reading every broadcast row.
 */
final class BroadcastMethod implements GatherMethod {
  @Override
  public String name() {
    return "broadcast";
  }

  @Override
  public Outcome run(BenchInput input) {
    JavaSparkContext jsc = input.jsc();
    Row[] rows = (Row[]) input.data().collect();
    Broadcast<Row[]> everything = jsc.broadcast(rows);
    try {
      Shape shape = input.shape();
      List<Integer> ranks = new ArrayList<>();
      for (int r = 0; r < input.ranks(); r++) {
        ranks.add(r);
      }
      List<long[]> digests =
          jsc.parallelize(ranks, input.ranks())
              .mapPartitionsWithIndex(
                  (partition, ignored) -> {
                    long checksum = 0;
                    Row[] all = everything.value();
                    for (Row row : all) {
                      checksum += shape.hash(row);
                    }
                    return List.of(Outcome.digest(partition, all.length, checksum)).iterator();
                  },
                  false)
              .collect();
      return Outcome.of(digests);
    } finally {
      everything.destroy();
    }
  }
}
