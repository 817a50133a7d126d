package io.npugather.spark.rendezvous;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.spark.rendezvous.RendezvousException.Reason;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Strangers against the driver's rendezvous service while a real round runs: idle, slowloris,
 * garbage and flooding connections must not delay the round by more than a small constant nor make
 * the service grow threads; what crosses the wire reveals no entry and cannot be altered.
 */
class RendezvousAttackTest {
  private static final Duration LONG = Duration.ofSeconds(60);
  private static final Duration BOUND = Duration.ofSeconds(30);
  private static final long ALLOWED_EXTRA_MS =
      1_500; // scheduling on a loaded 2-core machine included
  private static final int RANKS = 4;

  private RendezvousService service;
  private Ranks ranks;

  @BeforeEach
  void start() {
    service =
        RendezvousService.startStandalone(
            InetAddress.getLoopbackAddress(),
            RendezvousSettings.DEFAULTS.withHandshakeTimeoutMs(1_000).withMaxHandshakes(256, 32));
    ranks = new Ranks();
  }

  @AfterEach
  void stop() {
    ranks.close();
    service.close();
  }

  enum Kind {
    IDLE,
    SLOWLORIS,
    GARBAGE,
    FLOOD
  }

  /** Opens and feeds stranger connections of one kind on a thread until closed. */
  private final class Attacker implements AutoCloseable {
    final AtomicBoolean stop = new AtomicBoolean();
    final AtomicLong opened = new AtomicLong();
    final List<Socket> sockets = new ArrayList<>();
    final Thread thread;

    Attacker(Kind kind) {
      thread = new Thread(() -> run(kind), "test-attacker");
      thread.setDaemon(true);
      thread.start();
    }

    private void run(Kind kind) {
      Random random = new Random(7);
      try {
        while (!stop.get()) {
          int batch = kind == Kind.FLOOD ? 8 : sockets.size() < 400 ? 50 : 0;
          for (int i = 0; i < batch; i++) {
            Socket s = new Socket(service.host(), service.port());
            opened.incrementAndGet();
            if (kind == Kind.GARBAGE) {
              byte[] junk = new byte[512];
              random.nextBytes(junk);
              s.getOutputStream().write(junk);
            }
            sockets.add(s);
          }
          if (kind == Kind.SLOWLORIS) {
            for (Socket s : sockets) {
              try {
                s.getOutputStream().write(0x4E); // a request that never ends, a byte at a time
              } catch (IOException e) {
                // dropped by the service: as expected
              }
            }
          }
          if (kind == Kind.FLOOD) {
            for (Socket s : sockets) {
              s.close();
            }
            sockets.clear();
          }
          Thread.sleep(kind == Kind.FLOOD ? 2 : 100);
        }
      } catch (IOException | InterruptedException e) {
        // the test ended or the machine is out of sockets: the attack stops there
      }
    }

    @Override
    public void close() throws Exception {
      stop.set(true);
      thread.join();
      for (Socket s : sockets) {
        s.close();
      }
    }
  }

  /** One round whose last rank arrives late; the late rank's milliseconds to the table. */
  private long lateRankMs(RendezvousTicket ticket, int stage) throws Exception {
    List<Future<List<byte[]>>> early = new ArrayList<>();
    for (int r = 0; r < RANKS - 1; r++) {
      early.add(ranks.exchange(ticket, stage, 0, r, Ranks.entryOf(r, stage), LONG));
    }
    Thread.sleep(300);
    long t0 = System.nanoTime();
    List<byte[]> table =
        Ranks.result(
            ranks.exchange(ticket, stage, 0, RANKS - 1, Ranks.entryOf(RANKS - 1, stage), LONG),
            BOUND);
    long ms = (System.nanoTime() - t0) / 1_000_000;
    for (int r = 0; r < RANKS; r++) {
      assertArrayEquals(Ranks.entryOf(r, stage), table.get(r));
    }
    for (Future<List<byte[]>> f : early) {
      assertEquals(RANKS, Ranks.result(f, BOUND).size());
    }
    return ms;
  }

  private static long serviceThreads() {
    return Thread.getAllStackTraces().keySet().stream()
        .filter(
            t ->
                t.getName().startsWith("npugather-rendezvous-") && !t.getName().contains("cleaner"))
        .count();
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Kind.class)
  void strangersDoNotDelayARoundNorGrowTheServicesThreads(Kind kind) throws Exception {
    RendezvousTicket ticket = service.register(RANKS, LONG);
    long undisturbed = Math.min(lateRankMs(ticket, 1), lateRankMs(ticket, 2));
    long threadsBefore = serviceThreads();
    long attacked;
    long strangers;
    long threadsDuring;
    try (Attacker attacker = new Attacker(kind)) {
      Thread.sleep(200);
      attacked = lateRankMs(ticket, 3);
      threadsDuring = serviceThreads();
      strangers = attacker.opened.get();
    }
    System.out.println(
        "rendezvous under "
            + kind
            + ": "
            + strangers
            + " stranger connections; late rank "
            + attacked
            + " ms (undisturbed "
            + undisturbed
            + " ms); service threads "
            + threadsDuring);
    assertTrue(strangers > 0);
    assertTrue(
        attacked < undisturbed + ALLOWED_EXTRA_MS, attacked + " ms vs " + undisturbed + " ms");
    assertEquals(
        threadsBefore, threadsDuring, "the service's threads do not grow with connections");
    assertTrue(
        Ranks.eventually(BOUND, () -> service.openConnections() == 0), "strangers are all dropped");
  }

  /**
   * Relays one connection to the service, recording both directions, optionally flipping a byte.
   */
  private static final class Relay implements AutoCloseable {
    final ServerSocket listener = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
    final ByteArrayOutputStream toService = new ByteArrayOutputStream();
    final ByteArrayOutputStream fromService = new ByteArrayOutputStream();
    final Thread thread;

    /** flipFromEnd: 0 relays faithfully; k > 0 flips the k-th last byte the service sends. */
    Relay(String host, int port, int flipFromEnd) throws IOException {
      thread =
          new Thread(
              () -> {
                try (Socket client = listener.accept();
                    Socket upstream = new Socket(host, port)) {
                  Thread up = new Thread(() -> copy(client, upstream, toService, 0));
                  up.setDaemon(true);
                  up.start();
                  copy(upstream, client, fromService, flipFromEnd);
                  up.join();
                } catch (IOException | InterruptedException e) {
                  // the test fails on its own assertions
                }
              },
              "test-relay");
      thread.setDaemon(true);
      thread.start();
    }

    /**
     * Copies to the end; with flipFromEnd everything after the service's hello is held until the
     * source closes.
     */
    private static void copy(
        Socket from, Socket to, ByteArrayOutputStream record, int flipFromEnd) {
      try {
        InputStream in = from.getInputStream();
        OutputStream out = to.getOutputStream();
        ByteArrayOutputStream held = new ByteArrayOutputStream();
        int helloLeft = flipFromEnd == 0 ? Integer.MAX_VALUE : 8 + Protocol.NONCE_BYTES;
        byte[] buf = new byte[8192];
        for (int n; (n = in.read(buf, 0, Math.max(1, Math.min(buf.length, helloLeft)))) >= 0; ) {
          synchronized (record) {
            record.write(buf, 0, n);
          }
          if (helloLeft > 0) {
            out.write(buf, 0, n);
            helloLeft = helloLeft == Integer.MAX_VALUE ? helloLeft : helloLeft - n;
          } else {
            held.write(buf, 0, n);
          }
        }
        byte[] rest = held.toByteArray();
        if (rest.length >= flipFromEnd && flipFromEnd > 0) {
          rest[rest.length - flipFromEnd] ^= 0x01;
        }
        out.write(rest);
        to.shutdownOutput();
      } catch (IOException e) {
        // one side closed
      }
    }

    int port() {
      return listener.getLocalPort();
    }

    @Override
    public void close() throws Exception {
      listener.close();
      thread.join(BOUND.toMillis());
    }
  }

  private static boolean contains(byte[] haystack, byte[] needle) {
    outer:
    for (int i = 0; i + needle.length <= haystack.length; i++) {
      for (int j = 0; j < needle.length; j++) {
        if (haystack[i + j] != needle[j]) {
          continue outer;
        }
      }
      return true;
    }
    return false;
  }

  @Test
  void entriesAreNotReadableOnTheWire() throws Exception {
    RendezvousTicket ticket = service.register(2, LONG);
    byte[] secretEntry = "root-info-with-the-communicator-secret".getBytes(StandardCharsets.UTF_8);
    try (Relay relay = new Relay(ticket.host(), ticket.port(), 0)) {
      RendezvousTicket viaRelay =
          new RendezvousTicket(
              ticket.host(), relay.port(), 2, ticket.registrationId(), ticket.secret());
      Future<List<byte[]>> other = ranks.exchange(ticket, 5, 0, 1, Ranks.entryOf(1, 5), LONG);
      List<byte[]> table =
          RendezvousClient.exchange(viaRelay, 5, 0, 0, secretEntry, LONG, Ranks.NEVER);
      assertArrayEquals(secretEntry, table.get(0));
      assertArrayEquals(secretEntry, Ranks.result(other, BOUND).get(0));
      relay.close();
      assertTrue(relay.toService.size() > secretEntry.length);
      assertFalse(
          contains(relay.toService.toByteArray(), secretEntry),
          "the entry crossed the wire in clear");
      assertFalse(
          contains(relay.fromService.toByteArray(), secretEntry),
          "the table crossed the wire in clear");
    }
  }

  @Test
  void aTableAlteredInFlightIsRefused() throws Exception {
    RendezvousTicket ticket = service.register(2, LONG);
    // The last byte of the reply is its MAC's; 40 bytes before it lies the sealed entry of rank 1.
    for (int flip : new int[] {1, 40}) {
      int stage = 10 + flip;
      try (Relay relay = new Relay(ticket.host(), ticket.port(), flip)) {
        RendezvousTicket viaRelay =
            new RendezvousTicket(
                ticket.host(), relay.port(), 2, ticket.registrationId(), ticket.secret());
        Future<List<byte[]>> other =
            ranks.exchange(ticket, stage, 0, 1, Ranks.entryOf(1, stage), LONG);
        RendezvousException e =
            Ranks.failure(
                ranks.exchange(viaRelay, stage, 0, 0, Ranks.entryOf(0, stage), LONG), BOUND);
        assertEquals(Reason.AUTHENTICATION, e.reason(), e.getMessage());
        assertTrue(e.getMessage().contains("does not authenticate"), e.getMessage());
        Ranks.result(other, BOUND); // the honest rank got the true table
      }
    }
  }

  /** A whole valid request for rank 0 of the ticket's round, answering the hello of {@code in}. */
  private static byte[] validRequest(RendezvousTicket ticket, int stage, byte[] nonce) {
    byte[] sealed =
        Protocol.sealEntry(
            ticket.secret(), ticket.registrationId(), stage, 0, 0, Ranks.entryOf(0, stage));
    byte[] header =
        Protocol.requestHeader(ticket.registrationId(), stage, 0, 0, 5_000, sealed.length);
    return java.nio.ByteBuffer.allocate(header.length + 2 * Protocol.MAC_BYTES + sealed.length)
        .put(header)
        .put(Protocol.headerMac(ticket.secret(), nonce, header))
        .put(sealed)
        .put(Protocol.entryMac(ticket.secret(), nonce, header, sealed))
        .array();
  }

  @Test
  void mutatedRequestsAreRefusedAndNeverJoinARound() throws Exception {
    RendezvousTicket ticket = service.register(2, LONG);
    Random random = new Random(11);
    for (int i = 0; i < 300; i++) {
      try (Socket s = new Socket(ticket.host(), ticket.port())) {
        s.setSoTimeout((int) BOUND.toMillis());
        java.io.DataInputStream in = new java.io.DataInputStream(s.getInputStream());
        in.readInt();
        in.readInt();
        byte[] nonce = new byte[Protocol.NONCE_BYTES];
        in.readFully(nonce);
        byte[] request = validRequest(ticket, 20, nonce);
        // One to four flipped bytes, sometimes cut short: every byte of the request is covered.
        for (int flips = 1 + random.nextInt(4); flips > 0; flips--) {
          request[random.nextInt(request.length)] ^= (byte) (1 + random.nextInt(255));
        }
        int length = random.nextInt(4) == 0 ? random.nextInt(request.length) : request.length;
        s.getOutputStream().write(request, 0, length);
        s.shutdownOutput();
        readsToEnd(in);
      }
    }
    assertEquals(0, service.waitingRanks(), "no mutated request joined the round");
    assertTrue(Ranks.eventually(BOUND, () -> service.openConnections() == 0));
    for (Future<List<byte[]>> f : Ranks.round(ranks, ticket, 20, 0, LONG)) {
      assertArrayEquals(Ranks.entryOf(1, 20), Ranks.result(f, BOUND).get(1));
    }
  }

  private static void readsToEnd(InputStream in) {
    byte[] buf = new byte[1024];
    try {
      while (in.read(buf) >= 0) {
        // discard the service's answer
      }
    } catch (IOException e) {
      // reset by the service
    }
  }

  @Test
  void anEntryMovedToAnotherRankOrRoundDoesNotOpen() {
    byte[] secret = new byte[Protocol.SECRET_BYTES];
    new Random(3).nextBytes(secret);
    byte[] entry = Ranks.entryOf(2, 9);
    byte[] sealed = Protocol.sealEntry(secret, 7, 9, 0, 2, entry);
    assertArrayEquals(entry, Protocol.openEntry(secret, 7, 9, 0, 2, sealed));
    assertEquals(null, Protocol.openEntry(secret, 7, 9, 0, 3, sealed));
    assertEquals(null, Protocol.openEntry(secret, 7, 9, 1, 2, sealed));
    assertEquals(null, Protocol.openEntry(secret, 8, 9, 0, 2, sealed));
    sealed[sealed.length - 1] ^= 1;
    assertEquals(null, Protocol.openEntry(secret, 7, 9, 0, 2, sealed));
    assertEquals(null, Protocol.openEntry(secret, 7, 9, 0, 2, new byte[5]));
  }
}
