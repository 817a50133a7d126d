package io.npugather.spark.rendezvous;

import io.npugather.spark.rendezvous.RendezvousException.Reason;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.security.SecureRandom;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The rendezvous service's TCP server: one selector thread runs every connection (accept,
 * handshake, wait, reply), so the service's threads are bounded whatever the load, and a stranger
 * holds no thread and at most a header buffer.
 *
 * <p>Each connection gets a nonce ({@link Protocol#hello}); its request must authenticate under its
 * registration's secret and be complete within the handshake timeout; handshakes in progress are
 * bounded per peer address and in all, and a newcomer over a limit makes room by evicting the
 * oldest stranger that has sent nothing useful (a connection whose bytes so far begin a request to
 * a known registration, or whose header authenticated, goes last); malformed, oversized, foreign or
 * stalled connections are dropped without touching any round, and the lines about them are
 * rate-limited. Each poll round serves the connections with something to read before it drains the
 * accept queue, so a flood of connections (even from the ranks' own address) costs a rank at most a
 * poll round and a reconnection, never a turn behind the flood. An authenticated request joins its
 * round in {@link #rounds()}; the round's verdict goes out on the connection, which is then closed.
 * A waiting rank whose connection ends leaves its round.
 */
final class RendezvousServer {
  private static final Logger LOG = LoggerFactory.getLogger(RendezvousServer.class);

  /** How long a rejected connection's unread request is drained so the peer sees the error. */
  private static final long DRAIN_MS = 2_000;

  /**
   * The accept queue: a rank that got in waits behind at most this many connections, which one poll
   * round drains; a deeper queue would make it wait behind more of a flood than that. A SYN that
   * finds it full is dropped, and the client sends a new one after its patience ({@link
   * RendezvousClient#FIRST_PATIENCE_MS}) rather than the kernel's retransmission a second later.
   */
  static final int BACKLOG = 512;

  /** Most connections accepted in one poll round: the whole queue. */
  private static final int MAX_ACCEPTS_PER_ROUND = BACKLOG;

  private static final SecureRandom RANDOM = new SecureRandom();

  private final ServerSocketChannel server;
  private final Selector selector;
  private final int port;
  private final long handshakeTimeoutMs;
  private final int maxHandshakes;
  private final int maxHandshakesPerAddress;
  private final Thread selectorThread;
  private final Rounds<Seat> rounds;
  private final AtomicBoolean listenerClosed = new AtomicBoolean();
  private final AtomicBoolean stopping =
      new AtomicBoolean(); // the verdicts of the last rounds are queued

  /** Work for the selector thread (verdicts from other threads). */
  private final ConcurrentLinkedQueue<Runnable> tasks = new ConcurrentLinkedQueue<>();

  private final Set<Connection> open = ConcurrentHashMap.newKeySet();
  // Owned by the selector thread:
  private final LinkedHashSet<Connection> handshakes = new LinkedHashSet<>(); // in order of accept
  private final Map<InetAddress, Integer> handshakesByAddress = new HashMap<>();
  private final Set<Connection> draining = new HashSet<>();
  private final DropLog dropLog = new DropLog();

  /**
   * Binds to {@code address} (an ephemeral port) and starts the selector thread.
   *
   * @param timer runs the rounds' deadlines
   * @throws IllegalStateException when the address cannot be bound
   */
  RendezvousServer(
      DriverAddress address,
      RendezvousSettings settings,
      ScheduledExecutorService timer,
      String threadName) {
    this.handshakeTimeoutMs = settings.handshakeTimeoutMs();
    this.maxHandshakes = Math.max(1, settings.maxHandshakes());
    this.maxHandshakesPerAddress = Math.max(1, settings.maxHandshakesPerAddress());
    this.rounds = new Rounds<>(timer, this::answer);
    try {
      this.selector = Selector.open();
      ServerSocketChannel ss = ServerSocketChannel.open();
      try {
        ss.setOption(StandardSocketOptions.SO_REUSEADDR, true);
        ss.bind(new InetSocketAddress(address.bind(), 0), BACKLOG);
        ss.configureBlocking(false);
        ss.register(selector, SelectionKey.OP_ACCEPT);
      } catch (IOException e) {
        closeQuietly(ss);
        closeQuietly(selector);
        throw e;
      }
      this.server = ss;
      this.port = ss.socket().getLocalPort();
    } catch (IOException e) {
      throw new IllegalStateException(
          "cannot start the rendezvous service on " + address.description() + ": " + e.getMessage(),
          e);
    }
    this.selectorThread = new Thread(this::selectLoop, threadName);
    this.selectorThread.setDaemon(true);
    this.selectorThread.start();
  }

  /** The registrations and rounds this server's connections join. */
  Rounds<Seat> rounds() {
    return rounds;
  }

  int port() {
    return port;
  }

  /** Connections currently open. */
  int openConnections() {
    return open.size();
  }

  /** Stops accepting connections; the open ones carry on until {@link #stop}. */
  void closeListener() {
    listenerClosed.set(true);
    closeQuietly(server);
  }

  /**
   * Sends the verdicts already queued (for a second at most), then closes every connection and the
   * selector; waits up to two seconds for the selector thread unless called from it.
   */
  void stop() {
    closeListener();
    stopping.set(true);
    selector.wakeup();
    if (Thread.currentThread() != selectorThread) {
      try {
        selectorThread.join(TimeUnit.SECONDS.toMillis(2));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** A rank's place in its round: the connection its verdict goes out on. */
  final class Seat extends Rounds.Waiter {
    private final Connection connection;

    private Seat(Connection connection) {
      super(connection.rank);
      this.connection = connection;
    }

    /** Any thread: the verdict goes out from the selector thread. */
    private void send(Protocol.Verdict verdict) {
      tasks.add(
          () -> {
            Connection c = connection;
            if (c.phase == Phase.WAITING) {
              c.phase = Phase.ANSWERING;
              enqueue(c, verdict.forRank(c.reg.secret, c.nonce, rank));
            }
          });
      selector.wakeup();
    }
  }

  /** A round ended: its verdict is encoded once and sent to every rank that joined it. */
  private void answer(List<Seat> seats, Rounds.Outcome outcome) {
    Protocol.Verdict verdict =
        outcome.isCompleted()
            ? Protocol.Verdict.reply(outcome.table())
            : Protocol.Verdict.error(outcome.reason(), outcome.message());
    for (Seat seat : seats) {
      seat.send(verdict);
    }
  }

  private enum Phase {
    HEADER, // reading the request header and its MAC
    ENTRY, // authenticated header: reading the sealed entry and its MAC
    WAITING, // joined a round: waiting for the verdict, watching for the peer leaving
    ANSWERING, // writing the verdict, then closing
    REJECTED // wrote an error; reading and discarding until the peer closes or the drain ends
  }

  /** One accepted connection; its fields belong to the selector thread. */
  private final class Connection {
    final SocketChannel channel;
    final InetAddress peer;
    final byte[] nonce = new byte[Protocol.NONCE_BYTES];
    final long deadlineNanos; // of the handshake (HEADER, ENTRY) or the drain (REJECTED)
    long drainUntilNanos;
    long drainBudget;
    SelectionKey key;
    Phase phase = Phase.HEADER;
    ByteBuffer in = ByteBuffer.allocate(Protocol.REQUEST_HEADER_FRAME_BYTES);
    boolean promising; // what it sent so far begins a request to a known registration
    final ArrayDeque<ByteBuffer> out = new ArrayDeque<>();
    Protocol.RequestHeader header;
    Rounds<Seat>.Registration reg;
    int stageId;
    int stageAttempt;
    int rank;
    long timeoutMs;
    Seat seat; // set once it joined a round

    Connection(SocketChannel channel, InetAddress peer) {
      this.channel = channel;
      this.peer = peer;
      this.deadlineNanos = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(handshakeTimeoutMs);
      RANDOM.nextBytes(nonce);
    }
  }

  /** Lines about dropped connections: at most a few per interval, then a count. */
  private static final class DropLog {
    private static final long INTERVAL_NANOS = TimeUnit.SECONDS.toNanos(10);
    private static final int LINES_PER_INTERVAL = 3;
    private long intervalStart = System.nanoTime() - INTERVAL_NANOS;
    private int lines;
    private long suppressed;

    void warn(String format, Object... args) {
      long now = System.nanoTime();
      if (now - intervalStart >= INTERVAL_NANOS) {
        if (suppressed > 0) {
          LOG.warn(
              "rendezvous service: {} more connections were dropped in the last {} s",
              suppressed,
              TimeUnit.NANOSECONDS.toSeconds(INTERVAL_NANOS));
        }
        intervalStart = now;
        lines = 0;
        suppressed = 0;
      }
      if (lines < LINES_PER_INTERVAL) {
        lines++;
        LOG.warn(format, args);
      } else {
        suppressed++;
      }
    }
  }

  private void selectLoop() {
    long stopBy = Long.MAX_VALUE;
    while (true) {
      try {
        runTasks();
        if (stopping.get()) {
          // Let the verdicts of close() go out, briefly, then close everything.
          if (stopBy == Long.MAX_VALUE) {
            stopBy = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
          }
          if (System.nanoTime() - stopBy > 0 || !anythingToWrite()) {
            break;
          }
        }
        long waitMs =
            handshakes.isEmpty() && draining.isEmpty()
                ? 0
                : Math.max(
                    1, TimeUnit.NANOSECONDS.toMillis(nextDeadline() - System.nanoTime()) + 1);
        if (stopping.get()) {
          waitMs = 10;
        }
        selector.select(waitMs);
        boolean acceptable = false;
        for (Iterator<SelectionKey> it = selector.selectedKeys().iterator(); it.hasNext(); ) {
          SelectionKey key = it.next();
          it.remove();
          if (!key.isValid()) {
            continue;
          }
          if (key.isAcceptable()) {
            acceptable = true; // after the reads: what a rank sent counts before anyone is evicted
            continue;
          }
          Connection c = (Connection) key.attachment();
          try {
            if (key.isWritable()) {
              onWritable(c);
            }
            if (key.isValid() && key.isReadable()) {
              onReadable(c);
            }
          } catch (IOException | RuntimeException e) {
            LOG.debug("rendezvous service: connection from {} ended: {}", c.peer, e.toString());
            closeConnection(c);
          }
        }
        if (acceptable) {
          acceptAll();
        }
        expire();
      } catch (IOException | RuntimeException e) {
        if (listenerClosed.get()) {
          break;
        }
        LOG.warn("rendezvous service: selector failed: {}", e.toString());
      }
    }
    for (Connection c : new ArrayList<>(open)) {
      closeConnection(c);
    }
    closeQuietly(selector);
  }

  private void runTasks() {
    for (Runnable task; (task = tasks.poll()) != null; ) {
      task.run();
    }
  }

  private boolean anythingToWrite() {
    for (Connection c : open) {
      if (!c.out.isEmpty()) {
        return true;
      }
    }
    return false;
  }

  private long nextDeadline() {
    long next = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
    if (!handshakes.isEmpty()) {
      long first = handshakes.iterator().next().deadlineNanos;
      next = first - next < 0 ? first : next;
    }
    for (Connection c : draining) {
      next = c.drainUntilNanos - next < 0 ? c.drainUntilNanos : next;
    }
    return next;
  }

  /** Drains the accept queue (up to {@link #MAX_ACCEPTS_PER_ROUND}); each newcomer is greeted. */
  private void acceptAll() {
    for (int i = 0; i < MAX_ACCEPTS_PER_ROUND; i++) {
      SocketChannel channel;
      try {
        channel = server.accept();
      } catch (IOException e) {
        // e.g. out of file descriptors: what is open still completes; accept again later
        LOG.debug("rendezvous service: accept failed: {}", e.toString());
        return;
      }
      if (channel == null) {
        return;
      }
      InetAddress peer;
      try {
        peer = ((InetSocketAddress) channel.getRemoteAddress()).getAddress();
      } catch (IOException e) {
        closeQuietly(channel);
        continue;
      }
      Connection c = new Connection(channel, peer);
      try {
        channel.configureBlocking(false);
        channel.setOption(StandardSocketOptions.TCP_NODELAY, true);
        channel.setOption(StandardSocketOptions.SO_KEEPALIVE, true);
        // Greeted at once, not a poll round later: the sooner a rank answers, the sooner it is
        // told apart from the strangers around it. A connection already reset by its peer fails
        // here, before it can make anyone else make way.
        ByteBuffer hello = Protocol.hello(c.nonce);
        channel.write(hello);
        int ops = SelectionKey.OP_READ;
        if (hello.hasRemaining()) {
          c.out.add(hello);
          ops |= SelectionKey.OP_WRITE;
        }
        makeRoom(peer);
        c.key = channel.register(selector, ops, c);
      } catch (IOException e) {
        closeQuietly(channel);
        continue;
      }
      open.add(c);
      handshakes.add(c);
      handshakesByAddress.merge(peer, 1, Integer::sum);
    }
  }

  /**
   * Before a new connection from {@code peer}: when its address, or the service, has as many
   * handshakes as it may, one of them makes way (see {@link #evictOne}), so a newcomer (a real
   * rank) always gets its turn and a stranger can hold no slot for long.
   */
  private void makeRoom(InetAddress peer) {
    if (handshakesByAddress.getOrDefault(peer, 0) >= maxHandshakesPerAddress) {
      evictOne(peer);
    }
    if (handshakes.size() >= maxHandshakes) {
      evictOne(null);
    }
  }

  /**
   * Frees a handshake slot of {@code peer}'s (of anyone's when null). The oldest connection that
   * has sent nothing useful goes first, after a last look at what it sent meanwhile (a rank's
   * request may have just arrived, a stranger may have closed); only when there is none, the oldest
   * that began a request, and last the oldest whose header authenticated.
   */
  private void evictOne(InetAddress peer) {
    while (true) {
      Connection silent = null;
      Connection begun = null;
      Connection authenticated = null;
      for (Connection c : handshakes) {
        if (peer != null && !c.peer.equals(peer)) {
          continue;
        }
        if (c.phase == Phase.ENTRY) {
          authenticated = authenticated == null ? c : authenticated;
        } else if (c.promising) {
          begun = begun == null ? c : begun;
        } else {
          silent = c;
          break;
        }
      }
      if (silent == null) {
        Connection victim = begun != null ? begun : authenticated;
        if (victim != null) {
          drop(victim, peer);
        }
        return;
      }
      try {
        onReadable(silent);
      } catch (IOException | RuntimeException e) {
        closeConnection(silent);
      }
      if (!handshakes.contains(silent)) {
        return; // it closed, or completed its request: a slot is free
      }
      if (silent.phase == Phase.HEADER && !silent.promising) {
        drop(silent, peer);
        return;
      }
    }
  }

  private void drop(Connection c, InetAddress peer) {
    String which = c.promising || c.phase == Phase.ENTRY ? "a rank on its way" : "a stranger";
    if (peer != null) {
      dropLog.warn(
          "rendezvous service: more than {} handshakes from {} at once; dropping {}",
          maxHandshakesPerAddress,
          peer,
          which);
    } else {
      dropLog.warn(
          "rendezvous service: more than {} handshakes at once; dropping {} from {}",
          maxHandshakes,
          which,
          c.peer);
    }
    closeConnection(c);
  }

  private void endHandshake(Connection c) {
    if (handshakes.remove(c)) {
      handshakesByAddress.computeIfPresent(c.peer, (k, n) -> n > 1 ? n - 1 : null);
    }
  }

  private void expire() {
    long now = System.nanoTime();
    for (Iterator<Connection> it = handshakes.iterator(); it.hasNext(); ) {
      Connection c = it.next();
      if (now - c.deadlineNanos < 0) {
        break; // in order of acceptance, so of deadline
      }
      LOG.debug(
          "rendezvous service: dropping a connection from {} that did not complete its request "
              + "within {} ms",
          c.peer,
          handshakeTimeoutMs);
      closeConnection(c);
      it = handshakes.iterator();
    }
    for (Connection c : new ArrayList<>(draining)) {
      if (now - c.drainUntilNanos >= 0) {
        closeConnection(c);
      }
    }
  }

  private void onWritable(Connection c) throws IOException {
    while (!c.out.isEmpty()) {
      ByteBuffer b = c.out.peek();
      c.channel.write(b);
      if (b.hasRemaining()) {
        return;
      }
      c.out.poll();
    }
    c.key.interestOps(SelectionKey.OP_READ);
    if (c.phase == Phase.ANSWERING) {
      closeConnection(c);
    } else if (c.phase == Phase.REJECTED) {
      // Let the peer read the error before the close: drain what it still sends, bounded.
      c.channel.shutdownOutput();
      c.drainUntilNanos = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(DRAIN_MS);
      c.drainBudget = Protocol.MAX_SEALED_ENTRY_BYTES + 64L * 1024;
      draining.add(c);
    }
  }

  private void enqueue(Connection c, ByteBuffer... buffers) {
    if (!c.channel.isOpen()) {
      return;
    }
    c.out.addAll(Arrays.asList(buffers));
    if (c.key.isValid()) {
      c.key.interestOps(SelectionKey.OP_READ | SelectionKey.OP_WRITE);
    }
  }

  private void onReadable(Connection c) throws IOException {
    if (c.phase == Phase.WAITING || c.phase == Phase.ANSWERING || c.phase == Phase.REJECTED) {
      ByteBuffer sink = ByteBuffer.allocate(8192);
      int n = c.channel.read(sink);
      if (n < 0) {
        // The peer went away: a waiting rank leaves its round (its task was cancelled or failed).
        closeConnection(c);
      } else if (c.phase == Phase.REJECTED && (c.drainBudget -= n) <= 0) {
        closeConnection(c);
      } else if (n > 0 && c.phase == Phase.WAITING) {
        LOG.debug("rendezvous service: unexpected data from rank {} after its request", c.rank);
      }
      return;
    }
    if (c.channel.read(c.in) < 0) {
      closeConnection(c);
      return;
    }
    if (c.in.hasRemaining()) {
      if (c.phase == Phase.HEADER) {
        c.promising =
            Protocol.isPromisingRequestPrefix(c.in, id -> rounds.registration(id) != null);
      }
      return;
    }
    if (c.phase == Phase.HEADER) {
      onHeader(c);
    } else {
      onEntry(c);
    }
  }

  private void onHeader(Connection c) {
    Protocol.RequestHeader header = Protocol.RequestHeader.read(c.in.flip());
    c.header = header;
    if (header.magic() != Protocol.REQUEST_MAGIC) {
      LOG.debug(
          "rendezvous service: dropping a connection from {} (not a rendezvous request)", c.peer);
      closeConnection(c);
      return;
    }
    int version = header.version();
    long registrationId = header.registrationId();
    c.stageId = header.stageId();
    c.stageAttempt = header.stageAttempt();
    c.rank = header.rank();
    c.timeoutMs = header.timeoutMillis();
    int entryLength = header.entryLength();
    if (version != Protocol.VERSION) {
      reject(
          c,
          Reason.CONNECTION,
          "unsupported rendezvous protocol version "
              + version
              + " (the service speaks "
              + Protocol.VERSION
              + ")");
      return;
    }
    Rounds<Seat>.Registration reg = rounds.registration(registrationId);
    if (reg == null) {
      reject(
          c,
          Reason.UNKNOWN_REGISTRATION,
          "unknown registration "
              + registrationId
              + " (it was unregistered because its job ended, or the service restarted)");
      return;
    }
    if (!header.authenticates(reg.secret, c.nonce)) {
      dropLog.warn(
          "rendezvous service: authentication failed for registration {} from {}",
          registrationId,
          c.peer);
      reject(
          c,
          Reason.AUTHENTICATION,
          "authentication failed for registration "
              + registrationId
              + " (the ticket's secret was not accepted)");
      return;
    }
    c.reg = reg; // from here on errors are authenticated
    String problem = null;
    Reason reason = Reason.INVALID_ARGUMENT;
    if (c.rank < 0 || c.rank >= reg.rankSize) {
      problem = "rank " + c.rank + " is out of range [0, " + reg.rankSize + ")";
    } else if (c.stageId < 0 || c.stageAttempt < 0) {
      problem =
          "stage id and attempt must be >= 0, got stage "
              + c.stageId
              + " attempt "
              + c.stageAttempt;
    } else if (c.timeoutMs <= 0) {
      problem = "timeout must be positive, got " + c.timeoutMs + " ms";
    } else if (entryLength < Protocol.SEAL_BYTES || entryLength > Protocol.MAX_SEALED_ENTRY_BYTES) {
      reason = Reason.TOO_LARGE;
      problem =
          "entry of "
              + (entryLength - Protocol.SEAL_BYTES)
              + " bytes exceeds the limit of "
              + Protocol.MAX_ENTRY_BYTES
              + " bytes (1 MiB), or is shorter than its seal";
    }
    if (problem != null) {
      reject(c, reason, problem);
      return;
    }
    c.in = ByteBuffer.allocate(header.entryFrameBytes());
    c.phase = Phase.ENTRY;
  }

  private void onEntry(Connection c) {
    byte[] sealed = Protocol.readSealedEntry(c.in.flip(), c.reg.secret, c.nonce, c.header);
    c.in = null;
    if (sealed == null) {
      dropLog.warn(
          "rendezvous service: the entry of rank {} from {} does not authenticate", c.rank, c.peer);
      reject(
          c,
          Reason.AUTHENTICATION,
          "the entry of rank " + c.rank + " does not authenticate (altered in " + "flight?)");
      return;
    }
    endHandshake(c);
    c.phase = Phase.WAITING;
    c.seat = new Seat(c);
    Rounds.Rejection rejection =
        rounds.join(
            c.reg,
            c.stageId,
            c.stageAttempt,
            Math.min(c.timeoutMs, RendezvousService.MAX_TIMEOUT_MS),
            sealed,
            c.seat);
    if (rejection != null) {
      c.seat = null;
      reject(c, rejection.reason(), rejection.message());
    }
  }

  /** Sends an error to a peer whose request is refused, then lets it read it before closing. */
  private void reject(Connection c, Reason reason, String message) {
    endHandshake(c);
    c.phase = Phase.REJECTED;
    enqueue(
        c,
        Protocol.Verdict.error(reason, message)
            .forRank(c.reg == null ? null : c.reg.secret, c.nonce, c.rank));
  }

  /** Closes a connection; a rank that had joined an open round leaves it. */
  private void closeConnection(Connection c) {
    endHandshake(c);
    draining.remove(c);
    if (!open.remove(c)) {
      return;
    }
    if (c.key != null) {
      c.key.cancel();
    }
    closeQuietly(c.channel);
    if (c.seat != null) {
      rounds.leave(c.seat);
    }
  }

  private static void closeQuietly(AutoCloseable c) {
    try {
      c.close();
    } catch (Exception e) {
      // ignore
    }
  }
}
