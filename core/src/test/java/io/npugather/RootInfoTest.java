package io.npugather;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/** RootInfo's text form: what it reads back, and what it says about text it cannot read. */
class RootInfoTest {
  private static final String ALLOWED =
      "; allowed: BACKEND:BASE64, the text RootInfo.encode() makes (e.g. 'host:' and the root"
          + " rank's bytes in standard Base64)";

  @Test
  void encodeAndDecodeRoundTrip() {
    RootInfo info = RootInfo.of("host", new byte[] {1, 2, 3, (byte) 0xff});
    assertEquals("host:AQID/w==", info.encode());
    RootInfo back = RootInfo.decode(info.encode());
    assertEquals(info, back);
    assertArrayEquals(new byte[] {1, 2, 3, (byte) 0xff}, back.toBytes());
  }

  @Test
  void textThatIsNotBase64SaysWhatWasExpectedWithoutShowingTheSecret() {
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> RootInfo.decode("host:!!!"));
    assertEquals(
        "RootInfo text 'host:' + 3 characters (not shown: a root info is a secret) is invalid:"
            + " Illegal base64 character 21"
            + ALLOWED,
        e.getMessage());
    String secret = RootInfo.of("host", new byte[] {1, 2, 3, 4, 5, 6}).encode();
    e =
        assertThrows(
            IllegalArgumentException.class, () -> RootInfo.decode(secret + "\n")); // from a file
    assertFalse(e.getMessage().contains(secret.substring(5)), e.getMessage());
    assertEquals(
        "RootInfo text 'host:' + 9 characters (not shown: a root info is a secret) is invalid:"
            + " Illegal base64 character a"
            + ALLOWED,
        e.getMessage());
  }

  @Test
  void textWithoutABackendOrBytesSaysWhatWasExpected() {
    assertEquals(
        "RootInfo text of 8 characters (not shown: a root info is a secret) is invalid: no"
            + " BACKEND before a ':'"
            + ALLOWED,
        assertThrows(IllegalArgumentException.class, () -> RootInfo.decode("AQIDBAU="))
            .getMessage());
    assertEquals(
        "RootInfo text 'host:' + 0 characters (not shown: a root info is a secret) is invalid:"
            + " no bytes after the ':'"
            + ALLOWED,
        assertThrows(IllegalArgumentException.class, () -> RootInfo.decode("host:")).getMessage());
    assertEquals(
        "RootInfo text = null is invalid" + ALLOWED,
        assertThrows(IllegalArgumentException.class, () -> RootInfo.decode(null)).getMessage());
  }
}
