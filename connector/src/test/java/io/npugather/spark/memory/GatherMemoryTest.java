package io.npugather.spark.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.Duration;
import java.util.Map;
import org.apache.spark.SparkConf;
import org.junit.jupiter.api.Test;

class GatherMemoryTest {
  @Test
  void defaultsKeepAGibibyteForAMinute() {
    assertEquals(
        new GatherMemory.CacheSettings(LargeBufferCache.UP_TO_PEAK, Duration.ofSeconds(60)),
        GatherMemory.cacheSettings(Map.of()));
    assertEquals(
        LargeBufferCache.UP_TO_PEAK,
        GatherMemory.cacheSettings(Map.of(GatherMemory.CACHE_BYTES, " AUTO ")).maxIdleBytes());
  }

  @Test
  void sizesAndDurationsInSparkNotation() {
    assertEquals(
        new GatherMemory.CacheSettings(512L << 20, Duration.ofMinutes(5)),
        GatherMemory.cacheSettings(
            Map.of(GatherMemory.CACHE_BYTES, "512m", GatherMemory.CACHE_IDLE_TIMEOUT, "5m")));
    assertEquals(
        0, GatherMemory.cacheSettings(Map.of(GatherMemory.CACHE_BYTES, "0")).maxIdleBytes());
  }

  @Test
  void badValuesNameTheKeyTheValueAndWhatIsAllowed() {
    assertEquals(
        "spark.npugather.memory.cacheBytes = 'lots' is invalid; allowed: auto (as much as"
            + " the largest gather so far held), 0 (keep none) or a size such as 512m or 2g",
        assertThrows(
                IllegalArgumentException.class,
                () -> GatherMemory.cacheSettings(Map.of(GatherMemory.CACHE_BYTES, "lots")))
            .getMessage());
    assertEquals(
        "spark.npugather.memory.cacheBytes = '-1g' is invalid; allowed: auto (as much as"
            + " the largest gather so far held), 0 (keep none) or a size such as 512m or 2g",
        assertThrows(
                IllegalArgumentException.class,
                () -> GatherMemory.cacheSettings(Map.of(GatherMemory.CACHE_BYTES, "-1g")))
            .getMessage());
    assertEquals(
        "spark.npugather.memory.cacheIdleTimeout = '0s' is invalid; allowed: a positive"
            + " duration such as 60s or 5m",
        assertThrows(
                IllegalArgumentException.class,
                () -> GatherMemory.cacheSettings(Map.of(GatherMemory.CACHE_IDLE_TIMEOUT, "0s")))
            .getMessage());
    SparkConf conf = new SparkConf(false).set(GatherMemory.CACHE_IDLE_TIMEOUT, "soon");
    assertEquals(
        "spark.npugather.memory.cacheIdleTimeout = 'soon' is invalid; allowed: a"
            + " duration such as 120s, 5m or 500ms",
        assertThrows(IllegalArgumentException.class, () -> GatherMemory.checkConf(conf))
            .getMessage());
  }
}
