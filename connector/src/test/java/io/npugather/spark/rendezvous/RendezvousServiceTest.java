package io.npugather.spark.rendezvous;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.spark.rendezvous.RendezvousException.Reason;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.InputStream;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The rendezvous protocol and round semantics, against a service without SparkContext. */
class RendezvousServiceTest {
  private static final Duration LONG = Duration.ofSeconds(60);
  private static final Duration BOUND = Duration.ofSeconds(30); // generous: loaded 2-core machines

  private RendezvousService service;
  private Ranks ranks;

  @BeforeEach
  void start() {
    service =
        RendezvousService.startStandalone(
            InetAddress.getLoopbackAddress(),
            RendezvousSettings.DEFAULTS.withHandshakeTimeoutMs(1_000));
    ranks = new Ranks();
  }

  @AfterEach
  void stop() {
    ranks.close();
    service.close();
  }

  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {1, 2, 8})
  void everyRankReceivesTheSameTableIndexedByRank(int rankSize) throws Exception {
    RendezvousTicket ticket = service.register(rankSize, LONG);
    List<Future<List<byte[]>>> futures = Ranks.round(ranks, ticket, 7, 0, LONG);
    for (Future<List<byte[]>> f : futures) {
      List<byte[]> table = Ranks.result(f, BOUND);
      assertEquals(rankSize, table.size());
      for (int r = 0; r < rankSize; r++) {
        assertArrayEquals(Ranks.entryOf(r, 7), table.get(r), "entry of rank " + r);
      }
    }
    assertEquals(0, service.openRounds(), "a completed round is not held open");
    assertTrue(Ranks.eventually(BOUND, () -> service.openConnections() == 0), "connections closed");
  }

  @Test
  void consecutiveRoundsOfOneRegistrationAreIndependent() throws Exception {
    RendezvousTicket ticket = service.register(3, LONG);
    for (int stage = 0; stage < 5; stage++) {
      for (Future<List<byte[]>> f : Ranks.round(ranks, ticket, stage, 0, LONG)) {
        assertArrayEquals(Ranks.entryOf(2, stage), Ranks.result(f, BOUND).get(2));
      }
    }
    assertEquals(1, service.activeRegistrations());
  }

  @Test
  void emptyAndOneMebibyteEntriesAreAccepted() throws Exception {
    RendezvousTicket ticket = service.register(2, LONG);
    byte[] big = new byte[1 << 20];
    new Random(1).nextBytes(big);
    Future<List<byte[]>> a = ranks.exchange(ticket, 1, 0, 0, new byte[0], LONG);
    Future<List<byte[]>> b = ranks.exchange(ticket, 1, 0, 1, big, LONG);
    List<byte[]> ta = Ranks.result(a, BOUND);
    List<byte[]> tb = Ranks.result(b, BOUND);
    assertEquals(0, ta.get(0).length);
    assertArrayEquals(big, ta.get(1));
    assertArrayEquals(big, tb.get(1));
  }

  @Test
  void entryOverOneMebibyteIsRejected() {
    RendezvousTicket ticket = service.register(1, LONG);
    RendezvousException e =
        assertThrows(
            RendezvousException.class,
            () ->
                RendezvousClient.exchange(
                    ticket, 1, 0, 0, new byte[(1 << 20) + 1], LONG, Ranks.NEVER));
    assertEquals(Reason.TOO_LARGE, e.reason());
    assertTrue(e.getMessage().contains("1048577 bytes"), e.getMessage());
    assertTrue(e.getMessage().contains("rank 0"), e.getMessage());
  }

  @Test
  void oversizedLengthFromAnAuthenticatedPeerIsRejectedByTheService() throws Exception {
    RendezvousTicket ticket = service.register(1, LONG);
    try (Socket s = new Socket(ticket.host(), ticket.port())) {
      s.setSoTimeout(10_000);
      byte[] nonce = readHello(s.getInputStream());
      byte[] header =
          Protocol.requestHeader(ticket.registrationId(), 1, 0, 0, 5_000, Integer.MAX_VALUE);
      OutputStream out = s.getOutputStream();
      out.write(header);
      out.write(Protocol.headerMac(ticket.secret(), nonce, header));
      out.flush();
      DataInputStream in = new DataInputStream(s.getInputStream());
      assertEquals(Reason.TOO_LARGE.code(), in.readUnsignedByte());
      byte[] text = new byte[in.readInt()];
      in.readFully(text);
      assertTrue(new String(text, "UTF-8").contains("exceeds the limit"));
    }
    // the service is unaffected
    for (Future<List<byte[]>> f : Ranks.round(ranks, ticket, 2, 0, LONG)) {
      Ranks.result(f, BOUND);
    }
  }

  @Test
  void wrongSecretIsRejectedAndTheRoundStillCompletes() throws Exception {
    RendezvousTicket ticket = service.register(2, LONG);
    byte[] wrong = ticket.secret();
    wrong[0] ^= 1;
    RendezvousTicket forged =
        new RendezvousTicket(ticket.host(), ticket.port(), 2, ticket.registrationId(), wrong);
    Future<List<byte[]>> good0 = ranks.exchange(ticket, 3, 0, 0, Ranks.entryOf(0, 3), LONG);
    RendezvousException e =
        assertThrows(
            RendezvousException.class,
            () ->
                RendezvousClient.exchange(forged, 3, 0, 1, Ranks.entryOf(1, 3), LONG, Ranks.NEVER));
    assertEquals(Reason.AUTHENTICATION, e.reason());
    assertTrue(e.getMessage().contains("authentication failed"), e.getMessage());
    assertTrue(e.getMessage().contains("rank 1"), e.getMessage());
    Future<List<byte[]>> good1 = ranks.exchange(ticket, 3, 0, 1, Ranks.entryOf(1, 3), LONG);
    assertArrayEquals(Ranks.entryOf(1, 3), Ranks.result(good0, BOUND).get(1));
    assertArrayEquals(Ranks.entryOf(0, 3), Ranks.result(good1, BOUND).get(0));
  }

  @Test
  void garbageOversizedAndStalledConnectionsAreDroppedWhileAGoodRoundCompletes() throws Exception {
    RendezvousTicket ticket = service.register(4, LONG);
    List<Socket> bad = new ArrayList<>();
    try {
      // random bytes
      Socket garbage = new Socket(ticket.host(), ticket.port());
      bad.add(garbage);
      byte[] junk = new byte[4096];
      new Random(42).nextBytes(junk);
      garbage.getOutputStream().write(junk);
      // a request header claiming a 2 GiB entry, without a valid MAC
      Socket oversized = new Socket(ticket.host(), ticket.port());
      bad.add(oversized);
      oversized
          .getOutputStream()
          .write(Protocol.requestHeader(ticket.registrationId(), 1, 0, 0, 1000, Integer.MAX_VALUE));
      oversized.getOutputStream().write(new byte[32]);
      // a negative length prefix from a valid-looking header
      Socket negative = new Socket(ticket.host(), ticket.port());
      bad.add(negative);
      negative
          .getOutputStream()
          .write(Protocol.requestHeader(ticket.registrationId(), 1, 0, 0, 1000, -5));
      // connect and stall
      Socket stalled = new Socket(ticket.host(), ticket.port());
      bad.add(stalled);
      // half a header, then stall
      Socket partial = new Socket(ticket.host(), ticket.port());
      bad.add(partial);
      partial.getOutputStream().write(new byte[] {0x4E, 0x50});

      List<Future<List<byte[]>>> round = Ranks.round(ranks, ticket, 9, 0, LONG);
      for (Future<List<byte[]>> f : round) {
        assertArrayEquals(Ranks.entryOf(3, 9), Ranks.result(f, BOUND).get(3));
      }
      // every bad connection is closed by the service (stalled ones after the handshake timeout)
      for (Socket s : bad) {
        s.setSoTimeout((int) BOUND.toMillis());
        assertTrue(readsToEnd(s.getInputStream()), "service closed the connection");
      }
      assertTrue(Ranks.eventually(BOUND, () -> service.openConnections() == 0));
      assertEquals(1, service.activeRegistrations());
      assertFalse(service.isClosed());
    } finally {
      for (Socket s : bad) {
        s.close();
      }
    }
    // and it still serves
    for (Future<List<byte[]>> f : Ranks.round(ranks, ticket, 10, 0, LONG)) {
      Ranks.result(f, BOUND);
    }
  }

  @Test
  void timeoutNamesTheMissingRanksAndFiresInTime() throws Exception {
    RendezvousTicket ticket = service.register(4, LONG);
    Duration timeout = Duration.ofSeconds(1);
    long start = System.nanoTime();
    Future<List<byte[]>> r0 = ranks.exchange(ticket, 5, 0, 0, new byte[1], timeout);
    Future<List<byte[]>> r2 = ranks.exchange(ticket, 5, 0, 2, new byte[1], timeout);
    for (Future<List<byte[]>> f : List.of(r0, r2)) {
      RendezvousException e = Ranks.failure(f, BOUND);
      assertEquals(Reason.TIMEOUT, e.reason(), e.getMessage());
      assertTrue(e.getMessage().contains("ranks [1, 3] of 4 had not arrived"), e.getMessage());
      assertTrue(e.getMessage().contains("stage 5, attempt 0"), e.getMessage());
    }
    long elapsedMs = (System.nanoTime() - start) / 1_000_000;
    assertTrue(elapsedMs >= 900, "not before the timeout: " + elapsedMs);
    assertTrue(elapsedMs < 1_000 + 4_000, "timeout + slack on a loaded machine: " + elapsedMs);
    assertEquals(0, service.openRounds());
    // a late rank learns that the round failed
    RendezvousException late =
        assertThrows(
            RendezvousException.class,
            () -> RendezvousClient.exchange(ticket, 5, 0, 1, new byte[1], LONG, Ranks.NEVER));
    assertEquals(Reason.TIMEOUT, late.reason());
    assertTrue(late.getMessage().contains("already failed"), late.getMessage());
  }

  @Test
  void registrationTimeoutBoundsTheRoundEvenWhenRanksAskForMore() throws Exception {
    RendezvousTicket ticket = service.register(2, Duration.ofMillis(500));
    RendezvousException e =
        Ranks.failure(ranks.exchange(ticket, 1, 0, 1, new byte[0], LONG), BOUND);
    assertEquals(Reason.TIMEOUT, e.reason());
    assertTrue(e.getMessage().contains("ranks [0] of 2"), e.getMessage());
  }

  @Test
  void cancellationEndsABlockedExchangeAndFailsTheRoundForOthers() throws Exception {
    RendezvousTicket ticket = service.register(3, LONG);
    AtomicBoolean cancel = new AtomicBoolean();
    Future<List<byte[]>> waiting = ranks.exchange(ticket, 4, 0, 0, new byte[1], LONG, cancel::get);
    Future<List<byte[]>> other = ranks.exchange(ticket, 4, 0, 1, new byte[1], LONG);
    assertTrue(Ranks.eventually(BOUND, () -> service.waitingRanks() == 2));
    long t0 = System.nanoTime();
    cancel.set(true);
    RendezvousException e = Ranks.failure(waiting, BOUND);
    long ms = (System.nanoTime() - t0) / 1_000_000;
    assertEquals(Reason.CANCELLED, e.reason());
    assertTrue(
        e.getMessage().contains("rank 0") && e.getMessage().contains("cancelled"), e.getMessage());
    assertTrue(ms < 3_000, "cancellation took " + ms + " ms");
    // the service notices rank 0 left and fails the other waiter at once
    RendezvousException o = Ranks.failure(other, BOUND);
    assertEquals(Reason.RANK_LEFT, o.reason(), o.getMessage());
    assertTrue(o.getMessage().contains("rank 0 left the round"), o.getMessage());
    assertTrue(o.getMessage().contains("[2]"), o.getMessage());
  }

  @Test
  void interruptingTheWaitingThreadCancelsTheExchange() throws Exception {
    RendezvousTicket ticket = service.register(2, LONG);
    Thread[] runner = new Thread[1];
    Future<List<byte[]>> waiting =
        ranks.submit(
            () -> {
              runner[0] = Thread.currentThread();
              return RendezvousClient.exchange(ticket, 4, 0, 0, new byte[1], LONG, Ranks.NEVER);
            });
    assertTrue(Ranks.eventually(BOUND, () -> service.openRounds() == 1));
    runner[0].interrupt();
    assertEquals(Reason.CANCELLED, Ranks.failure(waiting, BOUND).reason());
  }

  @Test
  void newerAttemptSupersedesOlderAttempt() throws Exception {
    RendezvousTicket ticket = service.register(2, LONG);
    Future<List<byte[]>> old0 = ranks.exchange(ticket, 6, 0, 0, new byte[] {0}, LONG);
    assertTrue(Ranks.eventually(BOUND, () -> service.openRounds() == 1));
    Future<List<byte[]>> new1 = ranks.exchange(ticket, 6, 1, 1, new byte[] {11}, LONG);
    RendezvousException e = Ranks.failure(old0, BOUND);
    assertEquals(Reason.SUPERSEDED, e.reason());
    assertTrue(e.getMessage().contains("superseded by attempt 1"), e.getMessage());
    assertTrue(
        e.getMessage().contains("rank 0") && e.getMessage().contains("attempt 0"), e.getMessage());
    // an entry of the older attempt arriving later is rejected
    RendezvousException late =
        assertThrows(
            RendezvousException.class,
            () -> RendezvousClient.exchange(ticket, 6, 0, 1, new byte[] {1}, LONG, Ranks.NEVER));
    assertEquals(Reason.SUPERSEDED, late.reason());
    assertTrue(late.getMessage().contains("superseded by attempt 1"), late.getMessage());
    // the newer attempt completes
    Future<List<byte[]>> new0 = ranks.exchange(ticket, 6, 1, 0, new byte[] {10}, LONG);
    assertArrayEquals(new byte[] {10}, Ranks.result(new1, BOUND).get(0));
    assertArrayEquals(new byte[] {11}, Ranks.result(new0, BOUND).get(1));
    // other stages of the same registration are not affected by attempts of stage 6
    for (Future<List<byte[]>> f : Ranks.round(ranks, ticket, 7, 0, LONG)) {
      Ranks.result(f, BOUND);
    }
  }

  @Test
  void aRankSendingTwiceInOneRoundGetsAnErrorAndReplacesNothing() throws Exception {
    RendezvousTicket ticket = service.register(2, LONG);
    Future<List<byte[]>> first = ranks.exchange(ticket, 8, 0, 0, new byte[] {1}, LONG);
    assertTrue(Ranks.eventually(BOUND, () -> service.openRounds() == 1));
    RendezvousException dup =
        assertThrows(
            RendezvousException.class,
            () -> RendezvousClient.exchange(ticket, 8, 0, 0, new byte[] {2}, LONG, Ranks.NEVER));
    assertEquals(Reason.DUPLICATE_RANK, dup.reason());
    assertTrue(dup.getMessage().contains("rank 0 already sent its entry"), dup.getMessage());
    Future<List<byte[]>> second = ranks.exchange(ticket, 8, 0, 1, new byte[] {3}, LONG);
    assertArrayEquals(new byte[] {1}, Ranks.result(first, BOUND).get(0));
    assertArrayEquals(new byte[] {1}, Ranks.result(second, BOUND).get(0));
    // re-sending to the completed round is a duplicate too
    RendezvousException again =
        assertThrows(
            RendezvousException.class,
            () -> RendezvousClient.exchange(ticket, 8, 0, 1, new byte[] {3}, LONG, Ranks.NEVER));
    assertEquals(Reason.DUPLICATE_RANK, again.reason());
  }

  @Test
  void unregisterFailsWaitersPromptlyAndIsIdempotent() throws Exception {
    RendezvousTicket ticket = service.register(3, LONG);
    Future<List<byte[]>> a = ranks.exchange(ticket, 1, 0, 0, new byte[1], LONG);
    Future<List<byte[]>> b = ranks.exchange(ticket, 1, 0, 2, new byte[1], LONG);
    assertTrue(Ranks.eventually(BOUND, () -> service.waitingRanks() == 2));
    long t0 = System.nanoTime();
    service.unregister(ticket);
    for (Future<List<byte[]>> f : List.of(a, b)) {
      RendezvousException e = Ranks.failure(f, BOUND);
      assertEquals(Reason.UNKNOWN_REGISTRATION, e.reason(), e.getMessage());
      assertTrue(e.getMessage().contains("unregistered"), e.getMessage());
    }
    assertTrue((System.nanoTime() - t0) / 1_000_000 < 5_000);
    assertEquals(0, service.activeRegistrations());
    service.unregister(ticket); // idempotent
    RendezvousException e =
        assertThrows(
            RendezvousException.class,
            () -> RendezvousClient.exchange(ticket, 1, 0, 1, new byte[1], LONG, Ranks.NEVER));
    assertEquals(Reason.UNKNOWN_REGISTRATION, e.reason());
    assertTrue(
        e.getMessage().contains("unknown registration " + ticket.registrationId()), e.getMessage());
  }

  @Test
  void closingTheServiceFailsWaitersAndRefusesRegistrations() throws Exception {
    RendezvousTicket ticket = service.register(2, LONG);
    Future<List<byte[]>> a = ranks.exchange(ticket, 1, 0, 0, new byte[1], LONG);
    assertTrue(Ranks.eventually(BOUND, () -> service.openRounds() == 1));
    service.close();
    RendezvousException e = Ranks.failure(a, BOUND);
    assertTrue(
        e.reason() == Reason.UNKNOWN_REGISTRATION || e.reason() == Reason.CONNECTION,
        e.getMessage());
    assertEquals(0, service.activeRegistrations());
    assertThrows(IllegalStateException.class, () -> service.register(1, LONG));
    RendezvousException refused =
        assertThrows(
            RendezvousException.class,
            () -> RendezvousClient.exchange(ticket, 2, 0, 0, new byte[1], LONG, Ranks.NEVER));
    assertEquals(Reason.CONNECTION, refused.reason());
    service.close(); // idempotent
  }

  @Test
  void connectionFailureIsReportedWithTheAddress() throws Exception {
    int port;
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      port = s.getLocalPort();
    }
    RendezvousTicket ticket = new RendezvousTicket("127.0.0.1", port, 1, 99, new byte[32]);
    RendezvousException e =
        assertThrows(
            RendezvousException.class,
            () -> RendezvousClient.exchange(ticket, 0, 0, 0, new byte[1], LONG, Ranks.NEVER));
    assertEquals(Reason.CONNECTION, e.reason());
    assertTrue(e.getMessage().contains("127.0.0.1:" + port), e.getMessage());
  }

  @Test
  void invalidArgumentsFailBeforeConnecting() {
    RendezvousTicket ticket = service.register(2, LONG);
    assertEquals(
        Reason.INVALID_ARGUMENT,
        assertThrows(
                RendezvousException.class,
                () -> RendezvousClient.exchange(ticket, 0, 0, 2, new byte[1], LONG, Ranks.NEVER))
            .reason());
    assertEquals(
        Reason.INVALID_ARGUMENT,
        assertThrows(
                RendezvousException.class,
                () -> RendezvousClient.exchange(ticket, -1, 0, 0, new byte[1], LONG, Ranks.NEVER))
            .reason());
    assertEquals(
        Reason.INVALID_ARGUMENT,
        assertThrows(
                RendezvousException.class,
                () ->
                    RendezvousClient.exchange(
                        ticket, 0, 0, 0, new byte[1], Duration.ZERO, Ranks.NEVER))
            .reason());
    assertThrows(IllegalArgumentException.class, () -> service.register(0, LONG));
    assertThrows(IllegalArgumentException.class, () -> service.register(1, Duration.ZERO));
  }

  @Test
  void jobEndRemovesAWatchedRegistration() {
    RendezvousTicket watched = service.register(2, LONG);
    RendezvousTicket other = service.register(2, LONG);
    service.unregisterWhenJobEnds(watched, 42);
    service.jobStarted(1, Set.of(40, 41, 42));
    service.jobStarted(2, Set.of(7));
    service.jobEnded(2);
    assertEquals(2, service.activeRegistrations());
    service.jobEnded(1);
    assertEquals(1, service.activeRegistrations());
    // a watch added while its job is already running counts that job
    service.jobStarted(3, Set.of(50));
    service.unregisterWhenJobEnds(other, 50);
    service.jobEnded(3);
    assertEquals(0, service.activeRegistrations());
  }

  @Test
  void registrationEndsWhenItsOwnerIsGarbageCollected() throws Exception {
    RendezvousTicket kept = service.register(1, LONG);
    Object keptOwner = new Object();
    service.unregisterWhenUnreachable(kept, keptOwner);
    registerOwnedAndDrop();
    assertTrue(
        Ranks.eventually(
            BOUND,
            () -> {
              System.gc();
              return service.activeRegistrations() == 1;
            }),
        "the unreachable owner's registration was removed");
    // the reachable owner's registration still works
    Ranks.result(ranks.exchange(kept, 1, 0, 0, new byte[1], LONG), BOUND);
    assertEquals(1, service.activeRegistrations());
    java.lang.ref.Reference.reachabilityFence(keptOwner);
  }

  private void registerOwnedAndDrop() {
    RendezvousTicket dropped = service.register(1, LONG);
    service.unregisterWhenUnreachable(dropped, new Object());
    assertEquals(2, service.activeRegistrations());
  }

  @Test
  void ticketIsSerializableAndNeverPrintsItsSecret() throws Exception {
    RendezvousTicket ticket = service.register(4, LONG);
    String text = ticket.toString();
    assertFalse(text.toLowerCase().contains(HexFormat.of().formatHex(ticket.secret())), text);
    assertFalse(text.contains(Arrays.toString(ticket.secret())), text);
    assertTrue(text.contains("registration=" + ticket.registrationId()), text);
    assertTrue(ticket.secret().length >= 32);
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    try (ObjectOutputStream out = new ObjectOutputStream(bytes)) {
      out.writeObject(ticket);
    }
    RendezvousTicket copy;
    try (ObjectInputStream in =
        new ObjectInputStream(new ByteArrayInputStream(bytes.toByteArray()))) {
      copy = (RendezvousTicket) in.readObject();
    }
    assertEquals(ticket.host(), copy.host());
    assertEquals(ticket.port(), copy.port());
    assertEquals(ticket.rankSize(), copy.rankSize());
    assertEquals(ticket.registrationId(), copy.registrationId());
    for (Future<List<byte[]>> f : Ranks.round(ranks, copy, 1, 0, LONG)) {
      Ranks.result(f, BOUND);
    }
  }

  @Test
  void manyConcurrentRoundsOfManyRegistrationsStayApart() throws Exception {
    List<RendezvousTicket> tickets = new ArrayList<>();
    List<List<Future<List<byte[]>>>> rounds = new ArrayList<>();
    for (int reg = 0; reg < 4; reg++) {
      RendezvousTicket t = service.register(8, LONG);
      tickets.add(t);
      for (int stage = 0; stage < 3; stage++) {
        rounds.add(Ranks.round(ranks, t, stage, 0, LONG));
      }
    }
    int i = 0;
    for (RendezvousTicket t : tickets) {
      for (int stage = 0; stage < 3; stage++, i++) {
        for (Future<List<byte[]>> f : rounds.get(i)) {
          List<byte[]> table = Ranks.result(f, BOUND);
          for (int r = 0; r < 8; r++) {
            assertArrayEquals(Ranks.entryOf(r, stage), table.get(r));
          }
        }
      }
      service.unregister(t);
    }
    assertEquals(0, service.activeRegistrations());
    assertTrue(Ranks.eventually(BOUND, () -> service.openConnections() == 0));
  }

  @Test
  void missingRanksAreListedCompactly() {
    assertEquals("[0-3, 7, 9-10]", Protocol.ranks(List.of(0, 1, 2, 3, 7, 9, 10)));
    assertEquals("[5]", Protocol.ranks(List.of(5)));
    assertEquals("[]", Protocol.ranks(List.of()));
  }

  @Test
  void registrationsGetDistinctSecrets() {
    RendezvousTicket a = service.register(1, LONG);
    RendezvousTicket b = service.register(1, LONG);
    assertFalse(Arrays.equals(a.secret(), b.secret()));
    assertFalse(a.registrationId() == b.registrationId());
  }

  private static byte[] readHello(InputStream in) throws Exception {
    DataInputStream d = new DataInputStream(in);
    assertEquals(Protocol.HELLO_MAGIC, d.readInt());
    assertEquals(Protocol.VERSION, d.readInt());
    byte[] nonce = new byte[Protocol.NONCE_BYTES];
    d.readFully(nonce);
    return nonce;
  }

  /** Reads until the peer closes; true if it closed (EOF or reset), false on read timeout. */
  private static boolean readsToEnd(InputStream in) {
    byte[] buf = new byte[1024];
    try {
      while (in.read(buf) >= 0) {
        // discard (hello, error frames)
      }
      return true;
    } catch (java.net.SocketTimeoutException e) {
      return false;
    } catch (java.io.IOException e) {
      return true; // reset by the service
    }
  }
}
