package io.npugather;

import io.npugather.bridge.NativeCore;
import java.util.Arrays;
import java.util.Base64;
import java.util.Objects;
import org.bytedeco.javacpp.BytePointer;

/**
 * The opaque bytes the root rank creates and every rank joins with (for {@code host}: the root's
 * endpoint and a per-communicator secret; for {@code hccl}: HCCL's root info). Carry it to the
 * other ranks by any out-of-band channel; treat it as a secret.
 *
 * <p>On the root rank, {@link #close()} releases what the root info keeps open in this process
 * until the root's {@link Communicator#create} (the host backend's listening endpoint): close it
 * when the communicator will not be created after all. The root's create consumes it whether it
 * succeeds or fails; closing it again, or closing a copy received from the root, does nothing.
 */
public final class RootInfo implements AutoCloseable {
  private final String backend;
  private final byte[] bytes;

  private RootInfo(String backend, byte[] bytes) {
    this.backend = backend;
    this.bytes = bytes;
  }

  /** Wraps bytes received from the root rank. */
  public static RootInfo of(String backend, byte[] bytes) {
    Objects.requireNonNull(backend, "backend");
    Objects.requireNonNull(bytes, "bytes");
    if (bytes.length == 0) {
      throw new IllegalArgumentException("RootInfo bytes: empty; allowed: the root rank's bytes");
    }
    return new RootInfo(backend, bytes.clone());
  }

  public String backend() {
    return backend;
  }

  public byte[] toBytes() {
    return bytes.clone();
  }

  /** A text form ({@code backend:base64}) for environment variables and files. */
  public String encode() {
    return backend + ":" + Base64.getEncoder().encodeToString(bytes);
  }

  /**
   * Parses {@link #encode()}'s form.
   *
   * @throws IllegalArgumentException naming what is wrong and what is allowed: {@code
   *     BACKEND:BASE64}, the root rank's bytes in standard Base64 after the backend's name. The
   *     error shows the backend and the length of the rest, never the rest: a root info is a secret
   */
  public static RootInfo decode(String text) {
    if (text == null) {
      throw new IllegalArgumentException(
          "RootInfo text = null is invalid; allowed: " + ENCODED_FORM);
    }
    int colon = text.indexOf(':');
    if (colon <= 0) {
      throw new IllegalArgumentException(
          "RootInfo text of "
              + text.length()
              + " characters (not shown: a root info is a secret) is invalid: no BACKEND before a"
              + " ':'; allowed: "
              + ENCODED_FORM);
    }
    String backend = text.substring(0, colon);
    String base64 = text.substring(colon + 1);
    byte[] bytes;
    try {
      bytes = Base64.getDecoder().decode(base64);
    } catch (IllegalArgumentException e) {
      throw invalidBase64(backend, base64, e.getMessage());
    }
    if (bytes.length == 0) {
      throw invalidBase64(backend, base64, "no bytes after the ':'");
    }
    return of(backend, bytes);
  }

  /** What {@link #decode} allows, in the words of its errors. */
  private static final String ENCODED_FORM =
      "BACKEND:BASE64, the text RootInfo.encode() makes (e.g. 'host:' and the root rank's bytes in"
          + " standard Base64)";

  private static IllegalArgumentException invalidBase64(
      String backend, String base64, String problem) {
    return new IllegalArgumentException(
        "RootInfo text '"
            + backend
            + ":' + "
            + base64.length()
            + " characters (not shown: a root info is a secret) is invalid: "
            + problem
            + "; allowed: "
            + ENCODED_FORM);
  }

  int length() {
    return bytes.length;
  }

  byte[] bytes() {
    return bytes;
  }

  /** Releases what this process keeps open for this root info; idempotent. */
  @Override
  public void close() {
    try (BytePointer info = new BytePointer(bytes.length)) {
      info.put(bytes);
      NativeStatus.check(
          NativeCore.npg_release_root_info(backend, info, bytes.length), "RootInfo.close", -1);
    }
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof RootInfo r && backend.equals(r.backend) && Arrays.equals(bytes, r.bytes);
  }

  @Override
  public int hashCode() {
    return backend.hashCode() * 31 + Arrays.hashCode(bytes);
  }

  @Override
  public String toString() {
    return "RootInfo{" + backend + ", " + bytes.length + " bytes}";
  }
}
