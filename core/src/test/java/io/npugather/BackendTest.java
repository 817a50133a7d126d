package io.npugather;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.bridge.NativeCore;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import org.bytedeco.javacpp.BytePointer;
import org.junit.jupiter.api.Test;

class BackendTest {
  /** The native core's answer to {@code backend}: its error text, "" when it knows the name. */
  private static String nativeUnknownBackendError(String backend) {
    NativeCore.load();
    try (BytePointer oneByte = new BytePointer(1)) {
      int rc = NativeCore.npg_release_root_info(backend, oneByte, 1);
      String error = NativeCore.npg_last_error().getString();
      // A known backend may refuse the byte as a root info; only "is unknown" names the backend.
      return rc == ResultCode.INVALID_ARGUMENT.nativeCode() && error.contains("is unknown")
          ? error
          : "";
    }
  }

  @Test
  void theNativeCoreKnowsExactlyTheseBackendsInThisOrder() {
    String error = nativeUnknownBackendError("no-such-backend");
    String marker = "allowed values: ";
    assertTrue(error.contains("backend 'no-such-backend' is unknown; " + marker), error);
    List<String> nativeNames =
        Arrays.asList(error.substring(error.indexOf(marker) + marker.length()).split(", "));
    assertEquals(Backend.names(), nativeNames, error);
    for (Backend backend : Backend.values()) {
      assertEquals("", nativeUnknownBackendError(backend.wireName()), backend.wireName());
    }
  }

  @Test
  void namesParseToTheirBackendAndNothingElseDoes() {
    assertEquals(List.of("hccl", "lccl", "host"), Backend.names());
    for (Backend backend : Backend.values()) {
      assertSame(backend, Backend.parse("backend", backend.wireName()));
      assertEquals(backend.wireName(), backend.toString());
    }
    assertEquals(Optional.empty(), Backend.forName("HCCL"), "names are exact, lower case");
    assertEquals(Optional.empty(), Backend.forName(" host"));
    assertEquals(Optional.empty(), Backend.forName(null));
  }

  @Test
  void anUnknownNameIsRejectedNamingTheParameterTheValueAndTheAllowedNames() {
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class, () -> Backend.parse("AllGatherParam.backend", "nccl"));
    assertEquals(
        "AllGatherParam.backend = 'nccl' is invalid; allowed: one of [hccl, lccl, host]",
        e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> Backend.parse("backend", null));
    assertEquals("backend = 'null' is invalid; allowed: one of [hccl, lccl, host]", e.getMessage());
  }

  @Test
  void devicesNodesAndSetUpAreWhatTheBackendsDo() {
    assertTrue(Backend.HCCL.needsDevice());
    assertTrue(Backend.LCCL.needsDevice());
    assertFalse(Backend.HOST.needsDevice());

    assertTrue(Backend.LCCL.singleNode(), "LCCL runs on one node only");
    assertFalse(Backend.HCCL.singleNode());
    assertFalse(Backend.HOST.singleNode());

    assertTrue(Backend.HCCL.timeoutAtRootInfo(), "HCCL latches its timeouts at its first call");
    assertFalse(Backend.LCCL.timeoutAtRootInfo());
    assertFalse(Backend.HOST.timeoutAtRootInfo());

    assertTrue(Backend.HCCL.acceptsRankTableFile());
    assertFalse(Backend.LCCL.acceptsRankTableFile());
    assertFalse(Backend.HOST.acceptsRankTableFile());

    assertTrue(Backend.LCCL.numberedDomain());
    assertFalse(Backend.HCCL.numberedDomain());
    assertFalse(Backend.HOST.numberedDomain());
  }

  @Test
  void hostReportsTheTransportItPickedAndADeviceBackendItsName() {
    assertEquals(
        List.of("executor", "threads", "cma", "staging", "tcp"), Backend.HOST.transports());
    assertEquals(List.of("hccl"), Backend.HCCL.transports());
    assertEquals(List.of("lccl"), Backend.LCCL.transports());
  }

  @Test
  void theOperatorKeepsTheContractsDefaultAndSparkRunsOnAnyCluster() {
    assertSame(Backend.HCCL, Backend.OPERATOR_DEFAULT);
    assertEquals("hccl", AllGatherParam.builder().build().backend());
    assertSame(Backend.HOST, Backend.SPARK_DEFAULT);
    assertFalse(Backend.SPARK_DEFAULT.needsDevice());
  }
}
