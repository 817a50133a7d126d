package io.npugather.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.npugather.Backend;
import io.npugather.CommunicatorOptions.HostTransport;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The options as their declarations make them: a conf's text and a Java call agree. */
class AllGatherOptionsTest {
  private static final AllGatherOptions CHANGED =
      AllGatherOptions.defaults()
          .withBackend(Backend.LCCL)
          .withRankSize(4)
          .withRankRoot(3)
          .withCommDomain("job")
          .withTimeout(Duration.ofMillis(1500))
          .withSourceRankColumn("r")
          .withResourceName("gpu")
          .withRetryable(true)
          .withHostTransport(HostTransport.STAGING)
          .withInjectFailure("1:2");

  @Test
  void everyOptionReadsBackTheTextItsTypeWrites() {
    for (AllGatherOptions options : new AllGatherOptions[] {AllGatherOptions.defaults(), CHANGED}) {
      Map<String, String> texts = new LinkedHashMap<>();
      for (Setting<?> option : AllGatherOptions.OPTIONS) {
        texts.put(option.key(), text(option, options));
      }
      assertEquals(options.toString(), AllGatherOptions.defaults().with(texts).toString());
    }
    assertEquals(
        "AllGatherOptions{backend=lccl, rankSize=4, rankRoot=3, commDomain='job', timeout=1500ms,"
            + " sourceRankColumn=r, resourceName=gpu, retryable=true, hostTransport=STAGING,"
            + " injectFailure=1:2}",
        CHANGED.toString());
  }

  @Test
  void aWitherRefusesWhatTheSameKeyRefusesInAMap() {
    IllegalArgumentException byWither =
        assertThrows(
            IllegalArgumentException.class,
            () -> AllGatherOptions.defaults().withTimeout(Duration.ofDays(31)));
    assertEquals(
        "npugather.timeout = 31d is invalid; allowed: a positive duration of at most 30 days"
            + " (720h), such as 120s, 5m or 500ms",
        byWither.getMessage());
    IllegalArgumentException byMap =
        assertThrows(
            IllegalArgumentException.class,
            () -> AllGatherOptions.defaults().with(Map.of("timeout", "31d")));
    assertEquals(
        "timeout = '31d' is invalid; allowed: a positive duration of at most 30 days (720h), such"
            + " as 120s, 5m or 500ms",
        byMap.getMessage());
    assertEquals(
        "npugather.backend = gpu is invalid; allowed: one of [hccl, lccl, host]",
        assertThrows(
                IllegalArgumentException.class,
                () -> AllGatherOptions.defaults().withBackend(" GPU"))
            .getMessage());
  }

  /** The option's value in {@code options}, as a conf writes it. */
  private static <T> String text(Setting<T> option, AllGatherOptions options) {
    return option.type().text(options.get(option));
  }
}
