package io.npugather.spark.rendezvous;

/**
 * Tunables of the rendezvous server's handshakes (package-private: tests shorten the handshake
 * timeout and lower the limits; {@link #DEFAULTS} otherwise).
 *
 * @param handshakeTimeoutMs a connection must complete its whole request within this time, else it
 *     is dropped
 * @param maxHandshakes most requests in progress at once; a new connection beyond it evicts one,
 *     the oldest that has sent nothing useful first
 * @param maxHandshakesPerAddress most requests in progress from one address; beyond it one of the
 *     address's is evicted, the oldest that has sent nothing useful first. Ranks may share their
 *     address with a flood, so a rank has as long to answer its greeting as the service takes to
 *     accept this many more
 */
record RendezvousSettings(long handshakeTimeoutMs, int maxHandshakes, int maxHandshakesPerAddress) {
  static final RendezvousSettings DEFAULTS = new RendezvousSettings(10_000, 1024, 512);

  RendezvousSettings withHandshakeTimeoutMs(long ms) {
    return new RendezvousSettings(ms, maxHandshakes, maxHandshakesPerAddress);
  }

  RendezvousSettings withMaxHandshakes(int total, int perAddress) {
    return new RendezvousSettings(handshakeTimeoutMs, total, perAddress);
  }
}
