package io.npugather.spark.rendezvous;

import io.npugather.spark.rendezvous.RendezvousException.Reason;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerApplicationEnd;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.StageInfo;
import org.apache.spark.storage.RDDInfo;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Driver-side rendezvous service: every rank of a barrier stage sends one small entry and gets
 * back the table of all ranks' entries, indexed by rank and identical on every rank. The reply
 * goes out the moment the last rank's entry arrives.
 *
 * <p>One service per {@link SparkContext} ({@link #getOrStart}), started lazily and stopped when
 * the SparkContext stops. Transport: a TCP server socket on the driver host (ephemeral port) run
 * by one selector thread, whatever the number of connections (a connection stays open while its
 * rank waits, so the service sees a rank leave at once). Each connection authenticates with an
 * HMAC of a server nonce under the registration's secret over its request header and its sealed
 * entry ({@link Protocol}); every verdict carries a MAC for the rank's connection. A request must
 * be complete within the handshake timeout; handshakes in progress are bounded per peer address
 * and in all (the oldest makes way); malformed, oversized, foreign or stalled connections are
 * dropped without touching other rounds, and the lines about them are rate-limited.
 *
 * <p>Rounds are keyed by (registration, stage id, stage attempt). A newer attempt of a stage
 * fails the waiters of older attempts; every round is bounded by the timeout (the smaller of the
 * registration's and the rank's, counted from the first rank's arrival) and fails naming the
 * missing ranks; a waiting rank that disconnects fails the round for the others at once.
 */
public final class RendezvousService implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(RendezvousService.class);

  /** Longest timeout honoured (keeps nanoTime arithmetic far from overflow). */
  private static final long MAX_TIMEOUT_MS = TimeUnit.DAYS.toMillis(30);
  /** How long a rejected connection's unread request is drained so the peer sees the error. */
  private static final long DRAIN_MS = 2_000;

  private static final Map<SparkContext, RendezvousService> BY_CONTEXT = new IdentityHashMap<>();
  private static final AtomicLong NEXT_REGISTRATION_ID = new AtomicLong(1);
  private static final SecureRandom RANDOM = new SecureRandom();
  private static final AtomicInteger SERVICE_COUNTER = new AtomicInteger();
  private static final java.lang.ref.Cleaner CLEANER =
      java.lang.ref.Cleaner.create(daemonThreads("npugather-rendezvous-cleaner-"));

  /** Tunables (package-private: tests shorten the handshake timeout and lower the limits). */
  static final class Settings {
    /** A connection must complete its whole request within this time, else it is dropped. */
    long handshakeTimeoutMs = 10_000;
    /** Most requests in progress at once; a new connection beyond it evicts the oldest. */
    int maxHandshakes = 1024;
    /** Most requests in progress from one address; beyond it the address's oldest is evicted. */
    int maxHandshakesPerAddress = 128;

    Settings handshakeTimeoutMs(long ms) {
      this.handshakeTimeoutMs = ms;
      return this;
    }

    Settings maxHandshakes(int total, int perAddress) {
      this.maxHandshakes = total;
      this.maxHandshakesPerAddress = perAddress;
      return this;
    }
  }

  private final ServerSocketChannel server;
  private final Selector selector;
  private final String advertisedHost;
  private final int port;
  private final long handshakeTimeoutMs;
  private final int maxHandshakes;
  private final int maxHandshakesPerAddress;
  private final Thread selectorThread;
  private final ScheduledThreadPoolExecutor timer;
  private final ConcurrentHashMap<Long, Registration> registrations = new ConcurrentHashMap<>();
  private final AtomicBoolean closed = new AtomicBoolean();
  private final AtomicBoolean stopping = new AtomicBoolean(); // close() has queued its verdicts
  /** Work for the selector thread (verdicts from other threads). */
  private final ConcurrentLinkedQueue<Runnable> tasks = new ConcurrentLinkedQueue<>();
  private final Set<Connection> open = ConcurrentHashMap.newKeySet();
  // Owned by the selector thread:
  private final LinkedHashSet<Connection> handshakes = new LinkedHashSet<>(); // in order of accept
  private final Map<InetAddress, Integer> handshakesByAddress = new HashMap<>();
  private final Set<Connection> draining = new HashSet<>();
  private final DropLog dropLog = new DropLog();

  private final SparkContext sparkContext; // null when started without Spark (tests)
  private final SparkListener listener; // null when started without Spark

  private final Object jobLock = new Object();
  private final Map<Integer, Set<Integer>> runningJobRdds = new HashMap<>(); // jobId -> rdd ids
  private final Map<Long, JobWatch> watches = new HashMap<>(); // registrationId -> watch

  // ---------------------------------------------------------------------------------------------
  // Life cycle

  /**
   * The service of this SparkContext, started on first use. It stops when the SparkContext stops
   * (application end) or when {@link #close()} is called; a closed service is replaced by a new
   * one on the next call.
   *
   * @throws IllegalStateException if the SparkContext is stopped
   */
  public static RendezvousService getOrStart(SparkContext sc) {
    Objects.requireNonNull(sc, "sc");
    List<RendezvousService> stale = new ArrayList<>();
    RendezvousService service;
    synchronized (BY_CONTEXT) {
      for (Iterator<Map.Entry<SparkContext, RendezvousService>> it = BY_CONTEXT.entrySet().iterator();
          it.hasNext(); ) {
        Map.Entry<SparkContext, RendezvousService> e = it.next();
        if (e.getKey().isStopped() || e.getValue().closed.get()) {
          stale.add(e.getValue());
          it.remove();
        }
      }
      if (sc.isStopped()) {
        closeAll(stale);
        throw new IllegalStateException("cannot start the rendezvous service: the SparkContext is stopped");
      }
      service = BY_CONTEXT.get(sc);
      if (service == null) {
        InetAddress[] addresses = bindAndAdvertise(sc.getConf());
        service = new RendezvousService(addresses[0], addresses[1].getHostAddress(),
            hostToAdvertise(sc.getConf(), addresses[1]), sc, new Settings());
        BY_CONTEXT.put(sc, service);
      }
    }
    closeAll(stale);
    if (sc.isStopped()) { // stopped while we started: the listener may never hear the end
      service.close();
      throw new IllegalStateException("cannot start the rendezvous service: the SparkContext is stopped");
    }
    return service;
  }

  private static void closeAll(List<RendezvousService> services) {
    for (RendezvousService s : services) {
      s.close();
    }
  }

  /** [0] the address to bind, [1] the address whose host is advertised (unless spark.driver.host). */
  private static InetAddress[] bindAndAdvertise(SparkConf conf) {
    String master = conf.get("spark.master", "");
    if (master.equals("local") || master.startsWith("local[")) {
      InetAddress loopback = InetAddress.getLoopbackAddress();
      return new InetAddress[] {loopback, loopback};
    }
    String bind = conf.get("spark.driver.bindAddress", null);
    String host = conf.get("spark.driver.host", null);
    try {
      InetAddress bindAddress = bind != null && !bind.isEmpty() ? InetAddress.getByName(bind)
          : host != null && !host.isEmpty() ? InetAddress.getByName(host)
          : InetAddress.getLocalHost();
      InetAddress advertised = bindAddress.isAnyLocalAddress() ? InetAddress.getLocalHost() : bindAddress;
      return new InetAddress[] {bindAddress, advertised};
    } catch (UnknownHostException e) {
      throw new IllegalStateException("cannot resolve the driver address for the rendezvous service "
          + "(spark.driver.bindAddress=" + bind + ", spark.driver.host=" + host + "): " + e.getMessage(), e);
    }
  }

  private static String hostToAdvertise(SparkConf conf, InetAddress advertised) {
    String master = conf.get("spark.master", "");
    if (master.equals("local") || master.startsWith("local[")) {
      return advertised.getHostAddress();
    }
    String host = conf.get("spark.driver.host", null);
    return host != null && !host.isEmpty() ? host : advertised.getHostAddress();
  }

  /** A service without a SparkContext, bound to {@code bindAddress} (tests, benchmarks). */
  static RendezvousService startStandalone(InetAddress bindAddress, Settings settings) {
    return new RendezvousService(bindAddress, bindAddress.getHostAddress(), bindAddress.getHostAddress(),
        null, settings);
  }

  private RendezvousService(InetAddress bindAddress, String bindDescription, String advertisedHost,
      SparkContext sc, Settings settings) {
    int id = SERVICE_COUNTER.incrementAndGet();
    this.handshakeTimeoutMs = settings.handshakeTimeoutMs;
    this.maxHandshakes = Math.max(1, settings.maxHandshakes);
    this.maxHandshakesPerAddress = Math.max(1, settings.maxHandshakesPerAddress);
    this.advertisedHost = advertisedHost;
    try {
      this.selector = Selector.open();
      ServerSocketChannel ss = ServerSocketChannel.open();
      try {
        ss.setOption(StandardSocketOptions.SO_REUSEADDR, true);
        ss.bind(new InetSocketAddress(bindAddress, 0), 1024);
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
      throw new IllegalStateException("cannot start the rendezvous service on " + bindDescription + ": "
          + e.getMessage(), e);
    }
    this.timer = new ScheduledThreadPoolExecutor(1, daemonThreads("npugather-rendezvous-" + id + "-timer-"));
    this.timer.setRemoveOnCancelPolicy(true);
    this.sparkContext = sc;
    this.selectorThread = daemonThreads("npugather-rendezvous-" + id + "-selector-").newThread(this::selectLoop);
    this.selectorThread.start();
    if (sc != null) {
      this.listener = new Listener();
      sc.addSparkListener(listener);
    } else {
      this.listener = null;
    }
    LOG.info("NpuGather rendezvous service listening on {}:{} (advertised as {})",
        bindAddress.getHostAddress(), port, advertisedHost);
  }

  private static ThreadFactory daemonThreads(String prefix) {
    AtomicInteger n = new AtomicInteger();
    return r -> {
      Thread t = new Thread(r, prefix + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    };
  }

  /**
   * Stops the service: fails every waiting rank ("service stopped"), closes the server socket and
   * all connections, removes every registration. Idempotent.
   */
  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    closeQuietly(server);
    for (Registration reg : new ArrayList<>(registrations.values())) {
      remove(reg, Reason.UNKNOWN_REGISTRATION, "the rendezvous service stopped (the SparkContext stopped "
          + "or the service was closed)");
    }
    synchronized (jobLock) {
      watches.clear();
      runningJobRdds.clear();
    }
    timer.shutdownNow();
    // The selector thread sends the verdicts just queued (for a second at most), then closes all.
    stopping.set(true);
    selector.wakeup();
    if (Thread.currentThread() != selectorThread) {
      try {
        selectorThread.join(TimeUnit.SECONDS.toMillis(2));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    if (sparkContext != null) {
      synchronized (BY_CONTEXT) {
        if (BY_CONTEXT.get(sparkContext) == this) {
          BY_CONTEXT.remove(sparkContext);
        }
      }
      if (!sparkContext.isStopped()) {
        try {
          sparkContext.removeSparkListener(listener);
        } catch (RuntimeException e) {
          LOG.debug("could not remove the rendezvous listener", e);
        }
      }
    }
    LOG.info("NpuGather rendezvous service on {}:{} stopped", advertisedHost, port);
  }

  /** True once {@link #close()} ran (or the SparkContext stopped). */
  boolean isClosed() {
    return closed.get();
  }

  String host() {
    return advertisedHost;
  }

  int port() {
    return port;
  }

  // ---------------------------------------------------------------------------------------------
  // Registrations

  /**
   * A fresh registration for one execution of a barrier stage of {@code rankSize} ranks, with a new
   * random secret. Rounds of it fail when not all ranks arrive within {@code timeout} of the first
   * rank's arrival (a rank may ask for less).
   */
  public RendezvousTicket register(int rankSize, Duration timeout) {
    if (rankSize < 1 || rankSize > Protocol.MAX_RANKS) {
      throw new IllegalArgumentException("rankSize must be in [1, " + Protocol.MAX_RANKS + "], got " + rankSize);
    }
    Objects.requireNonNull(timeout, "timeout");
    if (timeout.isNegative() || timeout.isZero()) {
      throw new IllegalArgumentException("timeout must be positive, got " + timeout);
    }
    ensureOpen();
    byte[] secret = new byte[Protocol.SECRET_BYTES];
    RANDOM.nextBytes(secret);
    long id = NEXT_REGISTRATION_ID.getAndIncrement();
    Registration reg = new Registration(id, rankSize, secret, millis(timeout));
    registrations.put(id, reg);
    if (closed.get()) { // raced with close()
      registrations.remove(id);
      ensureOpen();
    }
    return new RendezvousTicket(advertisedHost, port, rankSize, id, secret);
  }

  /** Removes the ticket's registration; ranks waiting in its rounds fail at once. Idempotent. */
  public void unregister(RendezvousTicket ticket) {
    Objects.requireNonNull(ticket, "ticket");
    synchronized (jobLock) {
      watches.remove(ticket.registrationId());
    }
    Registration reg = registrations.get(ticket.registrationId());
    if (reg != null) {
      remove(reg, Reason.UNKNOWN_REGISTRATION, "registration " + reg.id
          + " was unregistered (its job ended, failed or was cancelled)");
    }
  }

  /**
   * Unregisters the ticket when the Spark job that runs stage(s) of RDD {@code rddId} ends (the
   * last of them, if several running jobs compute that RDD), so the registration lives as long
   * as that job. A job already running when this is called counts too.
   */
  public void unregisterWhenJobEnds(RendezvousTicket ticket, int rddId) {
    Objects.requireNonNull(ticket, "ticket");
    if (sparkContext == null) {
      // Job events are fed by the test hooks jobStarted/jobEnded.
      LOG.debug("rendezvous service without SparkContext: job watch for rdd {} needs job events", rddId);
    }
    if (!registrations.containsKey(ticket.registrationId())) {
      return; // already gone
    }
    synchronized (jobLock) {
      JobWatch watch = new JobWatch(ticket, rddId);
      for (Map.Entry<Integer, Set<Integer>> job : runningJobRdds.entrySet()) {
        if (job.getValue().contains(rddId)) {
          watch.jobs.add(job.getKey());
        }
      }
      watches.put(ticket.registrationId(), watch);
    }
  }

  /**
   * Unregisters the ticket once {@code owner} (typically the barrier RDD that carries the ticket in
   * its closure) is no longer reachable on the driver. Unlike {@link #unregisterWhenJobEnds}, this
   * keeps the registration valid for every job that recomputes the RDD (e.g. a DataFrame used by
   * several actions); it is released by garbage collection, so its timing is not deterministic.
   * Both may be combined with {@link #unregister}; all of them are idempotent.
   */
  public void unregisterWhenUnreachable(RendezvousTicket ticket, Object owner) {
    Objects.requireNonNull(ticket, "ticket");
    Objects.requireNonNull(owner, "owner");
    java.lang.ref.WeakReference<RendezvousService> self = new java.lang.ref.WeakReference<>(this);
    CLEANER.register(owner, () -> {
      RendezvousService service = self.get();
      if (service != null) {
        service.unregister(ticket);
      }
    });
  }

  /** Registrations currently held (leaks are visible in tests). */
  public int activeRegistrations() {
    return registrations.size();
  }

  /** Rounds still waiting for ranks, over all registrations (tests). */
  int openRounds() {
    int n = 0;
    for (Registration reg : registrations.values()) {
      synchronized (reg) {
        for (StageState st : reg.stages.values()) {
          if (st.round != null && st.round.open()) {
            n++;
          }
        }
      }
    }
    return n;
  }

  /** Ranks waiting in open rounds, over all registrations (tests). */
  int waitingRanks() {
    int n = 0;
    for (Registration reg : registrations.values()) {
      synchronized (reg) {
        for (StageState st : reg.stages.values()) {
          if (st.round != null && st.round.open()) {
            n += st.round.arrived;
          }
        }
      }
    }
    return n;
  }

  /** Connections currently open (tests). */
  int openConnections() {
    return open.size();
  }

  private void ensureOpen() {
    if (sparkContext != null && sparkContext.isStopped()) {
      close(); // the application-end event may have been lost; do not outlive the SparkContext
    }
    if (closed.get()) {
      throw new IllegalStateException("the rendezvous service is stopped");
    }
  }

  private void remove(Registration reg, Reason reason, String message) {
    registrations.remove(reg.id, reg);
    List<Runnable> after = new ArrayList<>();
    synchronized (reg) {
      if (reg.removed) {
        return;
      }
      reg.removed = true;
      reg.removedReason = message;
      for (StageState st : reg.stages.values()) {
        if (st.round != null && st.round.open()) {
          fail(st.round, reason, message, after);
        }
      }
      reg.stages.clear();
    }
    after.forEach(Runnable::run);
  }

  // Job watches (fed by the SparkListener; package-private so tests can drive them directly).

  void jobStarted(int jobId, Set<Integer> rddIds) {
    synchronized (jobLock) {
      runningJobRdds.put(jobId, rddIds);
      for (JobWatch w : watches.values()) {
        if (rddIds.contains(w.rddId)) {
          w.jobs.add(jobId);
        }
      }
    }
  }

  void jobEnded(int jobId) {
    List<RendezvousTicket> done = new ArrayList<>();
    synchronized (jobLock) {
      runningJobRdds.remove(jobId);
      for (Iterator<JobWatch> it = watches.values().iterator(); it.hasNext(); ) {
        JobWatch w = it.next();
        if (w.jobs.remove(jobId) && w.jobs.isEmpty()) {
          done.add(w.ticket);
          it.remove();
        }
      }
    }
    for (RendezvousTicket t : done) {
      unregister(t);
    }
  }

  private final class Listener extends SparkListener {
    @Override
    public void onJobStart(SparkListenerJobStart event) {
      try {
        Set<Integer> ids = new HashSet<>();
        for (StageInfo stage : CollectionConverters.asJava(event.stageInfos())) {
          for (RDDInfo rdd : CollectionConverters.asJava(stage.rddInfos())) {
            ids.add(rdd.id());
          }
        }
        jobStarted(event.jobId(), ids);
      } catch (RuntimeException e) {
        LOG.warn("rendezvous service: cannot track job {}", event.jobId(), e);
      }
    }

    @Override
    public void onJobEnd(SparkListenerJobEnd event) {
      try {
        jobEnded(event.jobId());
      } catch (RuntimeException e) {
        LOG.warn("rendezvous service: cannot handle the end of job {}", event.jobId(), e);
      }
    }

    @Override
    public void onApplicationEnd(SparkListenerApplicationEnd event) {
      try {
        close();
      } catch (RuntimeException e) {
        LOG.warn("rendezvous service: error while stopping", e);
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Connections: one selector thread runs every socket (accept, handshake, wait, reply), so the
  // service's threads are bounded whatever the load; a stranger holds no thread and at most a
  // header buffer.

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
    ByteBuffer in = ByteBuffer.allocate(Protocol.REQUEST_HEADER_BYTES + Protocol.MAC_BYTES);
    final ArrayDeque<ByteBuffer> out = new ArrayDeque<>();
    byte[] header;
    Registration reg;
    int stageId;
    int stageAttempt;
    int rank;
    long timeoutMs;
    Waiter waiter; // set once it joined a round

    Connection(SocketChannel channel, InetAddress peer) {
      this.channel = channel;
      this.peer = peer;
      this.deadlineNanos = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(handshakeTimeoutMs);
      RANDOM.nextBytes(nonce);
    }
  }

  /** A round's outcome, built once; each rank's copy ends with a MAC bound to its connection. */
  private static final class Verdict {
    final byte[] frame;
    final byte[] digest; // SHA-256 of a reply frame; null for an error

    private Verdict(byte[] frame, byte[] digest) {
      this.frame = frame;
      this.digest = digest;
    }

    static Verdict reply(byte[][] entries) {
      byte[] frame = Protocol.replyFrame(entries);
      return new Verdict(frame, Protocol.sha256Digest().digest(frame));
    }

    static Verdict error(Reason reason, String message) {
      return new Verdict(Protocol.errorFrame(reason, message), null);
    }

    /** The bytes for one rank: the shared frame, then its authentication. */
    ByteBuffer[] forRank(byte[] secret, byte[] nonce, int rank) {
      if (digest != null) {
        return new ByteBuffer[] {ByteBuffer.wrap(frame),
            ByteBuffer.wrap(Protocol.replyMac(secret, nonce, rank, digest))};
      }
      if (secret == null) {
        return new ByteBuffer[] {ByteBuffer.wrap(frame), ByteBuffer.wrap(new byte[] {0})};
      }
      return new ByteBuffer[] {ByteBuffer.wrap(frame), ByteBuffer.wrap(new byte[] {1}),
          ByteBuffer.wrap(Protocol.errorMac(secret, nonce, rank, frame))};
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
          LOG.warn("rendezvous service: {} more connections were dropped in the last {} s", suppressed,
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
        long waitMs = handshakes.isEmpty() && draining.isEmpty() ? 0 : Math.max(1,
            TimeUnit.NANOSECONDS.toMillis(nextDeadline() - System.nanoTime()) + 1);
        if (stopping.get()) {
          waitMs = 10;
        }
        selector.select(waitMs);
        for (Iterator<SelectionKey> it = selector.selectedKeys().iterator(); it.hasNext(); ) {
          SelectionKey key = it.next();
          it.remove();
          if (!key.isValid()) {
            continue;
          }
          if (key.isAcceptable()) {
            acceptAll();
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
        expire();
      } catch (IOException | RuntimeException e) {
        if (closed.get()) {
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

  private void acceptAll() {
    for (int i = 0; i < 256; i++) {
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
      makeRoom(peer);
      Connection c = new Connection(channel, peer);
      try {
        channel.configureBlocking(false);
        channel.setOption(StandardSocketOptions.TCP_NODELAY, true);
        channel.setOption(StandardSocketOptions.SO_KEEPALIVE, true);
        ByteBuffer hello = ByteBuffer.allocate(8 + Protocol.NONCE_BYTES);
        hello.putInt(Protocol.HELLO_MAGIC).putInt(Protocol.VERSION).put(c.nonce).flip();
        c.out.add(hello);
        c.key = channel.register(selector, SelectionKey.OP_READ | SelectionKey.OP_WRITE, c);
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
   * Before a new connection from {@code peer}: the oldest handshake of the same address, else the
   * oldest of all, makes way when the limits are reached, so a newcomer (a real rank) always gets
   * its turn and a stranger can hold no slot for long.
   */
  private void makeRoom(InetAddress peer) {
    if (handshakesByAddress.getOrDefault(peer, 0) >= maxHandshakesPerAddress) {
      for (Connection c : handshakes) {
        if (c.peer.equals(peer)) {
          dropLog.warn("rendezvous service: more than {} handshakes from {} at once; dropping its oldest",
              maxHandshakesPerAddress, peer);
          closeConnection(c);
          return;
        }
      }
    }
    if (handshakes.size() >= maxHandshakes) {
      Connection oldest = handshakes.iterator().next();
      dropLog.warn("rendezvous service: more than {} handshakes at once; dropping the oldest, from {}",
          maxHandshakes, oldest.peer);
      closeConnection(oldest);
    }
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
      LOG.debug("rendezvous service: dropping a connection from {} that did not complete its request "
          + "within {} ms", c.peer, handshakeTimeoutMs);
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
      return;
    }
    if (c.phase == Phase.HEADER) {
      onHeader(c);
    } else {
      onEntry(c);
    }
  }

  private void onHeader(Connection c) {
    ByteBuffer h = c.in.flip();
    c.header = new byte[Protocol.REQUEST_HEADER_BYTES];
    h.get(c.header);
    byte[] mac = new byte[Protocol.MAC_BYTES];
    h.get(mac);
    h = ByteBuffer.wrap(c.header);
    if (h.getInt() != Protocol.REQUEST_MAGIC) {
      LOG.debug("rendezvous service: dropping a connection from {} (not a rendezvous request)", c.peer);
      closeConnection(c);
      return;
    }
    int version = h.getInt();
    long registrationId = h.getLong();
    c.stageId = h.getInt();
    c.stageAttempt = h.getInt();
    c.rank = h.getInt();
    c.timeoutMs = h.getLong();
    int entryLength = h.getInt();
    if (version != Protocol.VERSION) {
      reject(c, Reason.CONNECTION, "unsupported rendezvous protocol version " + version
          + " (the service speaks " + Protocol.VERSION + ")");
      return;
    }
    Registration reg = registrations.get(registrationId);
    if (reg == null) {
      reject(c, Reason.UNKNOWN_REGISTRATION, "unknown registration " + registrationId
          + " (it was unregistered because its job ended, or the service restarted)");
      return;
    }
    if (!Protocol.macMatches(mac, Protocol.headerMac(reg.secret, c.nonce, c.header))) {
      dropLog.warn("rendezvous service: authentication failed for registration {} from {}", registrationId,
          c.peer);
      reject(c, Reason.AUTHENTICATION, "authentication failed for registration " + registrationId
          + " (the ticket's secret was not accepted)");
      return;
    }
    c.reg = reg; // from here on errors are authenticated
    String problem = null;
    Reason reason = Reason.INVALID_ARGUMENT;
    if (c.rank < 0 || c.rank >= reg.rankSize) {
      problem = "rank " + c.rank + " is out of range [0, " + reg.rankSize + ")";
    } else if (c.stageId < 0 || c.stageAttempt < 0) {
      problem = "stage id and attempt must be >= 0, got stage " + c.stageId + " attempt " + c.stageAttempt;
    } else if (c.timeoutMs <= 0) {
      problem = "timeout must be positive, got " + c.timeoutMs + " ms";
    } else if (entryLength < Protocol.SEAL_BYTES || entryLength > Protocol.MAX_SEALED_ENTRY_BYTES) {
      reason = Reason.TOO_LARGE;
      problem = "entry of " + (entryLength - Protocol.SEAL_BYTES) + " bytes exceeds the limit of "
          + Protocol.MAX_ENTRY_BYTES + " bytes (1 MiB), or is shorter than its seal";
    }
    if (problem != null) {
      reject(c, reason, problem);
      return;
    }
    c.in = ByteBuffer.allocate(entryLength + Protocol.MAC_BYTES);
    c.phase = Phase.ENTRY;
  }

  private void onEntry(Connection c) {
    ByteBuffer e = c.in.flip();
    byte[] sealed = new byte[e.remaining() - Protocol.MAC_BYTES];
    e.get(sealed);
    byte[] mac = new byte[Protocol.MAC_BYTES];
    e.get(mac);
    c.in = null;
    if (!Protocol.macMatches(mac, Protocol.entryMac(c.reg.secret, c.nonce, c.header, sealed))) {
      dropLog.warn("rendezvous service: the entry of rank {} from {} does not authenticate", c.rank, c.peer);
      reject(c, Reason.AUTHENTICATION, "the entry of rank " + c.rank + " does not authenticate (altered in "
          + "flight?)");
      return;
    }
    endHandshake(c);
    c.phase = Phase.WAITING;
    c.waiter = new Waiter(c, c.rank);
    Rejection rejection = join(c.reg, c.stageId, c.stageAttempt, c.rank, Math.min(c.timeoutMs, MAX_TIMEOUT_MS),
        sealed, c.waiter);
    if (rejection != null) {
      c.waiter = null;
      reject(c, rejection.reason, rejection.message);
    }
  }

  /** Sends an error to a peer whose request is refused, then lets it read it before closing. */
  private void reject(Connection c, Reason reason, String message) {
    endHandshake(c);
    c.phase = Phase.REJECTED;
    enqueue(c, Verdict.error(reason, message).forRank(c.reg == null ? null : c.reg.secret, c.nonce, c.rank));
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
    Waiter w = c.waiter;
    if (w != null && w.round != null) {
      left(w.round, w);
    }
  }

  private static void closeQuietly(AutoCloseable c) {
    try {
      c.close();
    } catch (Exception e) {
      // ignore
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Rounds

  private static final class Rejection {
    final Reason reason;
    final String message;

    Rejection(Reason reason, String message) {
      this.reason = reason;
      this.message = message;
    }
  }

  private Rejection join(Registration reg, int stageId, int stageAttempt, int rank, long timeoutMs,
      byte[] entry, Waiter waiter) {
    List<Runnable> after = new ArrayList<>();
    Rejection rejection = null;
    synchronized (reg) {
      if (reg.removed) {
        rejection = new Rejection(Reason.UNKNOWN_REGISTRATION, reg.removedReason);
      } else {
        StageState st = reg.stages.computeIfAbsent(stageId, k -> new StageState());
        if (stageAttempt < st.attempt) {
          rejection = new Rejection(Reason.SUPERSEDED, "stage " + stageId + " attempt " + stageAttempt
              + " was superseded by attempt " + st.attempt);
        } else {
          if (stageAttempt > st.attempt) {
            if (st.round != null && st.round.open()) {
              fail(st.round, Reason.SUPERSEDED, "superseded by attempt " + stageAttempt + " of stage " + stageId,
                  after);
            }
            st.attempt = stageAttempt;
            st.round = new Round(reg, stageId, stageAttempt);
          }
          Round round = st.round;
          if (round.completed) {
            rejection = new Rejection(Reason.DUPLICATE_RANK, "rank " + rank + " already sent its entry: the "
                + "round completed (a rank may send only once per round; a retried task or connection?)");
          } else if (round.failure != null) {
            rejection = new Rejection(round.failureReason, "the round already failed: " + round.failure);
          } else if (round.entries[rank] != null) {
            rejection = new Rejection(Reason.DUPLICATE_RANK, "rank " + rank + " already sent its entry "
                + "for this round (a rank may send only once per round; a retried task or connection?)");
          } else if (round.bytes + entry.length > Protocol.MAX_TABLE_BYTES) {
            String msg = "the table exceeds the limit of " + Protocol.MAX_TABLE_BYTES + " bytes (rank " + rank
                + " brought it to " + (round.bytes + entry.length) + " bytes); entries should be small metadata";
            fail(round, Reason.TOO_LARGE, msg, after);
            rejection = new Rejection(Reason.TOO_LARGE, msg);
          } else {
            round.entries[rank] = entry;
            round.waiters[rank] = waiter;
            round.arrived++;
            round.bytes += entry.length;
            waiter.round = round;
            if (round.arrived == reg.rankSize) {
              complete(round, after);
            } else {
              long effective = Math.min(timeoutMs, reg.timeoutMs);
              long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(effective);
              if (round.timeoutTask == null || deadline - round.deadlineNanos < 0) {
                round.deadlineNanos = deadline;
                round.deadlineTimeoutMs = effective;
                if (round.timeoutTask != null) {
                  round.timeoutTask.cancel(false);
                }
                try {
                  round.timeoutTask = timer.schedule(() -> onTimeout(round), effective, TimeUnit.MILLISECONDS);
                } catch (RejectedExecutionException e) {
                  fail(round, Reason.UNKNOWN_REGISTRATION, "the rendezvous service stopped", after);
                }
              }
            }
          }
        }
      }
    }
    after.forEach(Runnable::run);
    return rejection;
  }

  /** Under the registration's lock: the last rank arrived. */
  private void complete(Round round, List<Runnable> after) {
    byte[][] entries = round.entries;
    Waiter[] waiters = round.waiters;
    round.completed = true;
    round.entries = null;
    round.waiters = null;
    if (round.timeoutTask != null) {
      round.timeoutTask.cancel(false);
      round.timeoutTask = null;
    }
    after.add(() -> {
      Verdict verdict = Verdict.reply(entries); // built once: every rank gets the same table
      for (Waiter w : waiters) {
        w.send(verdict);
      }
    });
  }

  /** Under the registration's lock: fail an open round, answering every rank that arrived. */
  private void fail(Round round, Reason reason, String message, List<Runnable> after) {
    Waiter[] waiters = round.waiters;
    round.failure = message;
    round.failureReason = reason;
    round.entries = null;
    round.waiters = null;
    if (round.timeoutTask != null) {
      round.timeoutTask.cancel(false);
      round.timeoutTask = null;
    }
    LOG.info("rendezvous round {} failed: {}", round.name(), message);
    Verdict verdict = Verdict.error(reason, message);
    after.add(() -> {
      for (Waiter w : waiters) {
        if (w != null) {
          w.send(verdict);
        }
      }
    });
  }

  private void onTimeout(Round round) {
    List<Runnable> after = new ArrayList<>();
    Registration reg = round.reg;
    synchronized (reg) {
      if (!round.open() || System.nanoTime() - round.deadlineNanos < 0) {
        return; // finished meanwhile, or rescheduled to a different deadline
      }
      List<Integer> missing = round.missing();
      fail(round, Reason.TIMEOUT, "timed out after " + round.deadlineTimeoutMs + " ms: ranks "
          + Protocol.ranks(missing) + " of " + reg.rankSize + " had not arrived (" + round.arrived
          + " of " + reg.rankSize + " arrived)", after);
    }
    after.forEach(Runnable::run);
  }

  /** The connection of a rank that joined a round ended. */
  private void left(Round round, Waiter waiter) {
    List<Runnable> after = new ArrayList<>();
    synchronized (round.reg) {
      if (round.open() && round.waiters[waiter.rank] == waiter) {
        List<Integer> missing = round.missing();
        fail(round, Reason.RANK_LEFT, "rank " + waiter.rank + " left the round before it completed (its task "
            + "was cancelled or failed, or its connection broke) while ranks " + Protocol.ranks(missing)
            + " had not arrived", after);
      }
    }
    after.forEach(Runnable::run);
  }

  private static long millis(Duration d) {
    try {
      return Math.min(d.toMillis(), MAX_TIMEOUT_MS);
    } catch (ArithmeticException e) {
      return MAX_TIMEOUT_MS;
    }
  }

  private static final class Registration {
    final long id;
    final int rankSize;
    final byte[] secret;
    final long timeoutMs;
    final Map<Integer, StageState> stages = new HashMap<>(); // guarded by this
    boolean removed; // guarded by this
    String removedReason; // guarded by this

    Registration(long id, int rankSize, byte[] secret, long timeoutMs) {
      this.id = id;
      this.rankSize = rankSize;
      this.secret = secret;
      this.timeoutMs = Math.max(1, timeoutMs);
    }
  }

  /** Per (registration, stage id): the latest attempt and its round (kept after it finishes). */
  private static final class StageState {
    int attempt = -1;
    Round round;
  }

  private static final class Round {
    final Registration reg;
    final int stageId;
    final int stageAttempt;
    byte[][] entries; // null once finished
    Waiter[] waiters; // null once finished
    int arrived;
    long bytes;
    boolean completed;
    String failure;
    Reason failureReason;
    ScheduledFuture<?> timeoutTask;
    long deadlineNanos;
    long deadlineTimeoutMs;

    Round(Registration reg, int stageId, int stageAttempt) {
      this.reg = reg;
      this.stageId = stageId;
      this.stageAttempt = stageAttempt;
      this.entries = new byte[reg.rankSize][];
      this.waiters = new Waiter[reg.rankSize];
    }

    boolean open() {
      return !completed && failure == null;
    }

    List<Integer> missing() {
      List<Integer> missing = new ArrayList<>();
      if (entries != null) {
        for (int r = 0; r < entries.length; r++) {
          if (entries[r] == null) {
            missing.add(r);
          }
        }
      }
      return missing;
    }

    String name() {
      return "(registration " + reg.id + ", stage " + stageId + ", attempt " + stageAttempt + ")";
    }
  }

  /** One rank's open connection in a round; answered exactly once, then closed. */
  private final class Waiter {
    final Connection connection;
    final int rank;
    final AtomicBoolean answered = new AtomicBoolean();
    Round round;

    Waiter(Connection connection, int rank) {
      this.connection = connection;
      this.rank = rank;
    }

    /** Any thread: the verdict goes out from the selector thread. */
    void send(Verdict verdict) {
      if (!answered.compareAndSet(false, true)) {
        return;
      }
      tasks.add(() -> {
        Connection c = connection;
        if (c.phase == Phase.WAITING) {
          c.phase = Phase.ANSWERING;
          enqueue(c, verdict.forRank(c.reg.secret, c.nonce, rank));
        }
      });
      selector.wakeup();
    }
  }

  private static final class JobWatch {
    final RendezvousTicket ticket;
    final int rddId;
    final Set<Integer> jobs = new HashSet<>();

    JobWatch(RendezvousTicket ticket, int rddId) {
      this.ticket = ticket;
      this.rddId = rddId;
    }
  }

  @Override
  public String toString() {
    return "RendezvousService{" + advertisedHost + ":" + port + ", registrations=" + registrations.size()
        + (closed.get() ? ", closed" : "") + "}";
  }
}
