package io.npugather.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.spark.memory.GatherMemory;
import io.npugather.spark.testing.GatherLeaks;
import io.npugather.spark.testing.LocalSpark;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The plugin pays the JVM's one-time costs when the executor starts, and gathers go on as ever. */
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class NpuGatherPluginTest {
  @Test
  void theExecutorPluginWarmsTheJvmUpAndLeavesNoMemoryBehind() throws Exception {
    JvmWarmUp.run(); // on this thread too: it may run more than once
    assertEquals(0, GatherMemory.allocatedBytes());
    SparkSession spark = LocalSpark.cores(2).withPlugin().start("NpuGatherPluginTest");
    try {
      assertTrue(JvmWarmUp.awaitDone(TimeUnit.MINUTES.toMillis(2)), "the warm-up ended");
      List<Row> rows = NpuGather.allGatherOnNpu(spark.range(0, 10, 1, 2).toDF()).collectAsList();
      assertEquals(20, rows.size());
      long sum = rows.stream().mapToLong(r -> r.<Long>getAs("id")).sum();
      assertEquals(2 * 45, sum);
    } finally {
      spark.stop();
      GatherLeaks.awaitArrowReleased();
    }
  }
}
