package io.npugather.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.spark.memory.GatherMemory;
import io.npugather.spark.testing.LocalSpark;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The spark.npugather.* settings as Spark's own: listed by SET -v with default and doc, checked
 * when set, and a misspelled key refused naming it as written and the nearest key.
 */
class NpuGatherConfTest {
  @RegisterExtension
  static final LocalSpark SPARK = LocalSpark.cores(2).withFirstCall().onStart(s -> spark = s);

  private static SparkSession spark;

  @Test
  void setVListsEverySettingWithItsDefaultAndDoc() {
    Map<String, Row> listed = new HashMap<>();
    for (Row row : spark.sql("SET -v").collectAsList()) {
      listed.put(row.getString(0), row);
    }
    for (Setting<?> setting : NpuGatherConf.SETTINGS) {
      Row row = listed.get(setting.confKey());
      assertNotNull(row, setting.confKey() + " missing from SET -v");
      String shown = setting.defaultText() == null ? "<undefined>" : setting.defaultText();
      assertEquals(shown, row.getString(1), setting.confKey());
      assertEquals(setting.confDoc(), row.getString(2), setting.confKey());
      assertTrue(row.getString(2).length() > 20, setting.confKey());
    }
    assertEquals(
        NpuGatherConf.SETTINGS.size(),
        listed.keySet().stream().filter(k -> k.startsWith("spark.npugather.")).count());
  }

  @Test
  void aBadValueIsRefusedWhenSetNamingTheKeyTheValueAndWhatIsAllowed() {
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class,
            () -> spark.conf().set("spark.npugather.backend", "gpu"));
    assertEquals(
        "spark.npugather.backend = gpu is invalid; allowed: one of [hccl, lccl, host]",
        e.getMessage());
    e =
        assertThrows(
            IllegalArgumentException.class,
            () -> spark.conf().set("spark.npugather.output.releaseDelay", "soon"));
    assertTrue(
        e.getMessage().startsWith("spark.npugather.output.releaseDelay = soon is invalid"),
        e.getMessage());
    assertEquals("host", spark.conf().get("spark.npugather.backend"));
  }

  @Test
  void applicationWideSettingsCannotChangeInARunningSession() {
    Exception e =
        assertThrows(Exception.class, () -> spark.conf().set(GatherMemory.CACHE_BYTES, "2g"));
    assertTrue(e.getMessage().contains(GatherMemory.CACHE_BYTES), e.getMessage());
  }

  @Test
  void aMisspelledSessionKeyFailsTheGatherNamingItAndTheNearestKey() {
    Dataset<Row> df = spark.range(0, 4, 1, 2).toDF();
    spark.conf().set("spark.npugather.bakend", "hccl");
    try {
      IllegalArgumentException e =
          assertThrows(IllegalArgumentException.class, () -> NpuGather.allGatherOnNpu(df));
      assertEquals(
          "spark.npugather.bakend is not a setting of NpuGather; did you mean"
              + " spark.npugather.backend? (SET -v lists every spark.npugather.* setting)",
          e.getMessage());
      assertThrows(
          IllegalArgumentException.class,
          () -> NpuGather.allGatherOnNpu(df, Map.of("backend", "host")));
    } finally {
      spark.conf().unset("spark.npugather.bakend");
    }
    spark.conf().set("spark.npugather.memory.cacheByte", "1g");
    try {
      IllegalArgumentException e =
          assertThrows(IllegalArgumentException.class, () -> NpuGather.allGatherOnNpu(df));
      assertTrue(
          e.getMessage()
              .startsWith(
                  "spark.npugather.memory.cacheByte is not a setting of"
                      + " NpuGather; did you mean spark.npugather.memory.cacheBytes?"),
          e.getMessage());
    } finally {
      spark.conf().unset("spark.npugather.memory.cacheByte");
    }
  }

  @Test
  void optionKeysWorkWithOrWithoutThePrefixAndErrorsNameTheKeyAsWritten() {
    AllGatherOptions d = AllGatherOptions.defaults();
    for (String key : List.of("timeout", "npugather.timeout", "spark.npugather.timeout")) {
      assertEquals(60, d.with(Map.of(key, "60s")).timeout().toSeconds(), key);
      IllegalArgumentException e =
          assertThrows(IllegalArgumentException.class, () -> d.with(Map.of(key, "soon")));
      assertEquals(
          key + " = 'soon' is invalid; allowed: a duration such as 120s, 5m or 500ms",
          e.getMessage());
    }
    IllegalArgumentException bare =
        assertThrows(IllegalArgumentException.class, () -> d.with(Map.of("bakend", "hccl")));
    assertTrue(
        bare.getMessage()
            .startsWith(
                "option 'bakend' is unknown; did you mean 'backend'?"
                    + " allowed: backend, rankSize,"),
        bare.getMessage());
    IllegalArgumentException prefixed =
        assertThrows(
            IllegalArgumentException.class, () -> d.with(Map.of("npugather.rankSise", "2")));
    assertTrue(
        prefixed
            .getMessage()
            .startsWith(
                "option 'npugather.rankSise' is unknown; did you"
                    + " mean 'npugather.rankSize'? allowed: npugather.backend,"),
        prefixed.getMessage());
    IllegalArgumentException fromCall =
        assertThrows(
            IllegalArgumentException.class,
            () ->
                NpuGather.allGatherOnNpu(
                    spark.range(0, 4, 1, 2).toDF(), Map.of("sourceRankColum", "r")));
    assertTrue(
        fromCall
            .getMessage()
            .startsWith(
                "option 'sourceRankColum' is unknown; did you" + " mean 'sourceRankColumn'?"),
        fromCall.getMessage());
  }

  @Test
  void theNearestKeyIsTheClosestInEditDistance() {
    List<String> keys = NpuGatherConf.keys();
    assertEquals("spark.npugather.timeout", NpuGatherConf.nearest("spark.npugather.timout", keys));
    assertEquals(
        "spark.npugather.hostTransport",
        NpuGatherConf.nearest("spark.npugather.hosttransport", keys));
    assertEquals(
        "spark.npugather.memory.cacheIdleTimeout",
        NpuGatherConf.nearest("spark.npugather.memory.idleTimeout", keys));
  }
}
