package io.npugather.spark;

import static io.npugather.spark.testing.Causes.messages;
import static io.npugather.spark.testing.RankMajor.assertOnEveryPartition;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.spark.testing.GatherLeaks;
import io.npugather.spark.testing.LocalSpark;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * allGatherOnNpu on the smaller local masters, local[1] and local[2] (NpuGatherTest covers
 * local[4]): as many ranks as task slots works, one more fails before any task runs.
 */
class LocalMastersTest {
  @ParameterizedTest(name = "local[{0}]")
  @ValueSource(ints = {1, 2})
  void asManyRanksAsSlotsGatherAndOneMoreIsRefused(int slots) {
    SparkSession spark = LocalSpark.cores(slots).start("LocalMastersTest");
    try {
      Dataset<Row> df =
          spark
              .range(0, 10_000, 1, slots)
              .selectExpr(
                  "id",
                  "rand(11) as score",
                  "cast(randn(12) as float) as f",
                  "uuid(13) as tag",
                  "array(rand(14), rand(15)) as pair");
      df.cache().count();
      Dataset<Row> gathered = NpuGather.allGatherOnNpu(df);
      assertOnEveryPartition(df, gathered);
      assertEquals(slots * 10_000L, GatherMetrics.of(gathered).rowsGathered());
      df.unpersist(true);

      Dataset<Row> tooMany = spark.range(0, 100, 1, slots + 1).toDF();
      Exception e = assertThrows(Exception.class, () -> NpuGather.allGatherOnNpu(tooMany).count());
      String message = messages(e);
      assertTrue(message.contains(String.valueOf(slots + 1)) && message.contains("slot"), message);
      GatherLeaks.awaitArrowReleased();
    } finally {
      spark.stop();
    }
  }
}
