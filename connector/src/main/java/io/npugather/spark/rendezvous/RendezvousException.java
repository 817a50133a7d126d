package io.npugather.spark.rendezvous;

/**
 * A rendezvous round could not complete for this rank. The message names the rank, the round
 * (registration, stage, stage attempt) and the cause; {@link #reason()} classifies the cause.
 */
public class RendezvousException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** Why a round failed for a rank; {@link #code()} is its code on the wire, fixed per reason. */
  public enum Reason {
    /** Not every rank arrived within the timeout. */
    TIMEOUT(1),
    /** The caller's cancellation signal fired (or its thread was interrupted). */
    CANCELLED(2),
    /** A newer attempt of the same stage started. */
    SUPERSEDED(3),
    /** The ticket's registration is unknown, was unregistered, or the service stopped. */
    UNKNOWN_REGISTRATION(4),
    /** The ticket's secret was not accepted. */
    AUTHENTICATION(5),
    /** This rank already sent its entry for this round. */
    DUPLICATE_RANK(6),
    /** An entry (or the whole table) exceeds the size limits. */
    TOO_LARGE(7),
    /** Another rank left the round before it completed (its task failed or was cancelled). */
    RANK_LEFT(8),
    /** Bad arguments (rank out of range, negative stage, ...). */
    INVALID_ARGUMENT(9),
    /** The service could not be reached, or the connection broke or carried malformed data. */
    CONNECTION(10);

    private final int code;

    Reason(int code) {
      this.code = code;
    }

    /** The reason an ERROR frame's code names; a code no reason has is a malformed frame. */
    static Reason fromCode(int code) {
      for (Reason r : values()) {
        if (r.code == code) {
          return r;
        }
      }
      return CONNECTION;
    }

    /** The reason's code on the wire, in [1, 255]: never renumber one, add new ones after. */
    int code() {
      return code;
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
