package io.npugather.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.spark.testing.GatherLeaks;
import io.npugather.spark.testing.LocalSpark;
import java.util.List;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.core.Logger;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.SparkStrategy;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import scala.jdk.javaapi.CollectionConverters;

/** The connector set up from spark-defaults.conf, as a Spark SQL extension. */
class NpuGatherExtensionsTest {
  private SparkSession spark;

  @AfterEach
  void stopSpark() {
    if (spark != null) {
      spark.stop();
    }
    GatherLeaks.awaitArrowReleased();
  }

  /** A fresh session from the entries a spark-defaults.conf would hold. */
  private static SparkSession fromDefaults(String... entries) {
    LocalSpark local = LocalSpark.cores(2);
    for (String entry : entries) {
      String[] keyValue = entry.split("=", 2);
      local.conf(keyValue[0], keyValue[1]);
    }
    return local.start("NpuGatherExtensionsTest");
  }

  private static List<SparkStrategy> planningStrategies(SparkSession session) {
    var classic = (org.apache.spark.sql.classic.SparkSession) session;
    return CollectionConverters.asJava(classic.sessionState().planner().strategies());
  }

  @Test
  void theExtensionPlansTheGatherFromTheSessionsStartWithoutAFirstCall() {
    spark =
        fromDefaults(
            "spark.sql.extensions=io.npugather.spark.NpuGatherExtensions",
            "spark.npugather.timeout=30s");
    assertTrue(planningStrategies(spark).contains(NpuAllGatherStrategy$.MODULE$));
    assertTrue(
        spark.sql("SET -v").collectAsList().stream()
            .anyMatch(
                r ->
                    r.getString(0).equals("spark.npugather.timeout")
                        && r.getString(1).equals("30s")));

    List<Row> rows = NpuGather.allGatherOnNpu(spark.range(0, 10, 1, 2).toDF()).collectAsList();
    assertEquals(20, rows.size());
    // Planned by the extension's strategy: the first call added none of its own.
    assertEquals(0, spark.experimental().extraStrategies().size());
    assertEquals(
        1,
        planningStrategies(spark).stream().filter(s -> s == NpuAllGatherStrategy$.MODULE$).count());
  }

  @Test
  void withoutTheExtensionTheFirstCallInstallsTheSameOnce() {
    spark = fromDefaults();
    assertTrue(!planningStrategies(spark).contains(NpuAllGatherStrategy$.MODULE$));
    NpuGather.allGatherOnNpu(spark.range(0, 10, 1, 2).toDF()).collectAsList();
    NpuGather.allGatherOnNpu(spark.range(0, 10, 1, 2).toDF()).collectAsList();
    assertEquals(
        1,
        planningStrategies(spark).stream().filter(s -> s == NpuAllGatherStrategy$.MODULE$).count());
  }

  @Test
  void aMisspelledKeyInTheDefaultsFailsTheGatherNamingTheNearestKey() {
    spark =
        fromDefaults(
            "spark.sql.extensions=io.npugather.spark.NpuGatherExtensions",
            "spark.npugather.retriable=true");
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class,
            () -> NpuGather.allGatherOnNpu(spark.range(0, 10, 1, 2).toDF()));
    assertTrue(
        e.getMessage()
            .startsWith(
                "spark.npugather.retriable is not a setting of NpuGather;"
                    + " did you mean spark.npugather.retryable?"),
        e.getMessage());
  }

  @Test
  void aBadValueInTheDefaultsFailsOnlyTheQueriesThatGatherWithTheSameMessage() {
    spark =
        fromDefaults(
            "spark.sql.extensions=io.npugather.spark.NpuGatherExtensions",
            "spark.npugather.timeout=soon",
            "spark.npugather.join.auto=maybe");
    assertEquals(3, spark.range(3).count());
    assertEquals(2, spark.sql("SELECT id FROM range(5) WHERE id > 2").collectAsList().size());
    IllegalArgumentException gather =
        assertThrows(
            IllegalArgumentException.class,
            () -> NpuGather.allGatherOnNpu(spark.range(0, 10, 1, 2).toDF()));
    assertEquals(
        "spark.npugather.timeout = 'soon' is invalid; allowed: a duration such as 120s, 5m or"
            + " 500ms",
        gather.getMessage());
    // A value set in the running session is still refused when it is set.
    IllegalArgumentException set =
        assertThrows(
            IllegalArgumentException.class,
            () -> spark.conf().set("spark.npugather.timeout", "later"));
    assertTrue(set.getMessage().contains("'later' is invalid"), set.getMessage());
  }

  @Test
  void aMisspelledKeyInTheDefaultsIsReportedOncePerSession() {
    GatherInSparkUiTest.LogLines log = new GatherInSparkUiTest.LogLines();
    log.start();
    Logger root = (Logger) LogManager.getRootLogger();
    root.addAppender(log);
    try {
      spark =
          fromDefaults(
              "spark.sql.extensions=io.npugather.spark.NpuGatherExtensions",
              "spark.npugather.retriable=true");
      spark.range(3).count();
      spark.range(5).filter("id > 1").collectAsList();
      spark.sql("SELECT count(*) FROM range(4)").collectAsList();
      assertEquals(1, warnings(log), log.lines.toString());
      spark.newSession().range(2).count();
      assertEquals(2, warnings(log), log.lines.toString());
    } finally {
      root.removeAppender(log);
    }
  }

  private static long warnings(GatherInSparkUiTest.LogLines log) {
    synchronized (log.lines) {
      return log.lines.stream()
          .filter(line -> line.startsWith("spark.npugather.retriable is not a setting"))
          .count();
    }
  }
}
