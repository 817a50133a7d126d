package io.npugather.spark.rendezvous;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.npugather.spark.rendezvous.RendezvousException.Reason;
import java.util.EnumMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The reasons' codes are the wire format: services and clients of other builds read them. */
class ReasonCodeTest {
  private static final Map<Reason, Integer> WIRE_CODES =
      new EnumMap<>(
          Map.of(
              Reason.TIMEOUT, 1,
              Reason.CANCELLED, 2,
              Reason.SUPERSEDED, 3,
              Reason.UNKNOWN_REGISTRATION, 4,
              Reason.AUTHENTICATION, 5,
              Reason.DUPLICATE_RANK, 6,
              Reason.TOO_LARGE, 7,
              Reason.RANK_LEFT, 8,
              Reason.INVALID_ARGUMENT, 9,
              Reason.CONNECTION, 10));

  @Test
  void everyReasonKeepsItsWireCodeBothWays() {
    assertEquals(Reason.values().length, WIRE_CODES.size(), "a reason without a fixed wire code");
    WIRE_CODES.forEach(
        (reason, code) -> {
          assertEquals(code, reason.code(), reason.name());
          assertEquals(reason, Reason.fromCode(code), "code " + code);
        });
  }

  @Test
  void aCodeNoReasonHasIsAMalformedFrame() {
    for (int unknown : new int[] {0, 11, 255, -1}) {
      assertEquals(Reason.CONNECTION, Reason.fromCode(unknown), "code " + unknown);
    }
  }
}
