package io.npugather.spark.rendezvous;

import java.io.IOException;
import java.io.InvalidObjectException;
import java.io.ObjectInputStream;
import java.io.Serializable;
import java.util.Objects;

/**
 * What a task needs to reach the driver's {@link RendezvousService}: the service's host and port,
 * the registration id and rank count, and a per-registration random secret that the task proves
 * knowledge of (HMAC) when it connects. It is shipped to executors inside the task closure. {@link
 * #toString()} never prints the secret.
 */
public final class RendezvousTicket implements Serializable {
  private static final long serialVersionUID = 1L;

  private final String host;
  private final int port;
  private final int rankSize;
  private final long registrationId;
  private final byte[] secret;

  RendezvousTicket(String host, int port, int rankSize, long registrationId, byte[] secret) {
    this.host = Objects.requireNonNull(host, "host");
    this.port = port;
    this.rankSize = rankSize;
    this.registrationId = registrationId;
    this.secret = secret.clone();
    validate();
  }

  private void validate() {
    if (host.isEmpty()) {
      throw new IllegalArgumentException("host must not be empty");
    }
    if (port < 1 || port > 65535) {
      throw new IllegalArgumentException("port must be in [1, 65535], got " + port);
    }
    if (rankSize < 1) {
      throw new IllegalArgumentException("rankSize must be >= 1, got " + rankSize);
    }
    if (secret == null || secret.length < Protocol.SECRET_BYTES) {
      throw new IllegalArgumentException(
          "secret must have at least " + Protocol.SECRET_BYTES + " bytes");
    }
  }

  /** Host name or address of the driver's rendezvous service. */
  public String host() {
    return host;
  }

  /** TCP port of the driver's rendezvous service. */
  public int port() {
    return port;
  }

  /** Number of ranks of the barrier stage this registration is for. */
  public int rankSize() {
    return rankSize;
  }

  /** Id of the registration on the service. */
  public long registrationId() {
    return registrationId;
  }

  /** The shared secret (a copy). */
  byte[] secret() {
    return secret.clone();
  }

  private void readObject(ObjectInputStream in) throws IOException, ClassNotFoundException {
    in.defaultReadObject();
    try {
      Objects.requireNonNull(host, "host");
      validate();
    } catch (RuntimeException e) {
      InvalidObjectException ioe =
          new InvalidObjectException("invalid RendezvousTicket: " + e.getMessage());
      ioe.initCause(e);
      throw ioe;
    }
  }

  @Override
  public String toString() {
    return "RendezvousTicket{registration="
        + registrationId
        + ", rankSize="
        + rankSize
        + ", service="
        + host
        + ":"
        + port
        + "}";
  }
}
