package io.npugather.spark.rendezvous;

/**
 * A rendezvous round could not complete for this rank. The message names the rank, the round
 * (registration, stage, stage attempt) and the cause; {@link #reason()} classifies the cause.
 */
public class RendezvousException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** Why a round failed for a rank. */
  public enum Reason {
    /** Not every rank arrived within the timeout. */
    TIMEOUT,
    /** The caller's cancellation signal fired (or its thread was interrupted). */
    CANCELLED,
    /** A newer attempt of the same stage started. */
    SUPERSEDED,
    /** The ticket's registration is unknown, was unregistered, or the service stopped. */
    UNKNOWN_REGISTRATION,
    /** The ticket's secret was not accepted. */
    AUTHENTICATION,
    /** This rank already sent its entry for this round. */
    DUPLICATE_RANK,
    /** An entry (or the whole table) exceeds the size limits. */
    TOO_LARGE,
    /** Another rank left the round before it completed (its task failed or was cancelled). */
    RANK_LEFT,
    /** Bad arguments (rank out of range, negative stage, ...). */
    INVALID_ARGUMENT,
    /** The service could not be reached, or the connection broke or carried malformed data. */
    CONNECTION;

    static Reason fromCode(int code) {
      Reason[] all = values();
      return code >= 1 && code <= all.length ? all[code - 1] : CONNECTION;
    }

    int code() {
      return ordinal() + 1;
    }
  }

  private final Reason reason;

  public RendezvousException(Reason reason, String message) {
    super(message);
    this.reason = reason;
  }

  public RendezvousException(Reason reason, String message, Throwable cause) {
    super(message, cause);
    this.reason = reason;
  }

  /** The class of failure. */
  public Reason reason() {
    return reason;
  }
}
