package io.npugather;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The timeout a communicator accepts: positive and at most 30 days, refused naming the value. */
class CommunicatorOptionsTest {
  @Test
  void theTimeoutIsPositiveAndAtMost30Days() {
    assertEquals(
        Duration.ofDays(30),
        CommunicatorOptions.defaults().withTimeout(Duration.ofDays(30)).timeout());
    assertEquals(
        Duration.ofMillis(1),
        CommunicatorOptions.defaults().withTimeout(Duration.ofMillis(1)).timeout());
    for (Duration bad :
        new Duration[] {
          Duration.ZERO,
          Duration.ofSeconds(-5),
          Duration.ofDays(30).plusMillis(1),
          Duration.ofDays(99_999_999_999L),
          Duration.ofSeconds(Long.MAX_VALUE)
        }) {
      IllegalArgumentException e =
          assertThrows(
              IllegalArgumentException.class,
              () -> CommunicatorOptions.defaults().withTimeout(bad));
      assertEquals(
          "timeout = "
              + bad
              + " is invalid; allowed: a positive duration of at most 30 days (720h)",
          e.getMessage());
    }
  }
}
