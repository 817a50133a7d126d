package io.npugather.spark.rendezvous;

/** Tickets for tests that need a run's rank count but never reach a service. */
public final class TestTickets {
  private TestTickets() {}

  /** A well-formed ticket for {@code rankSize} ranks, pointing at no service. */
  public static RendezvousTicket forRanks(int rankSize) {
    return new RendezvousTicket("127.0.0.1", 1, rankSize, 1, new byte[Protocol.SECRET_BYTES]);
  }
}
