package io.npugather.spark.rendezvous;

import io.npugather.spark.rendezvous.RendezvousException.Reason;
import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
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
 * the SparkContext stops. Transport: a TCP server socket on the driver host (ephemeral port), one
 * acceptor thread and one pooled daemon thread per open connection (a connection stays open while
 * its rank waits, so the service sees a rank leave at once). Each connection authenticates with
 * an HMAC of a server nonce under the registration's secret; malformed, oversized, foreign or
 * stalled connections are dropped without touching other rounds.
 *
 * <p>Rounds are keyed by (registration, stage id, stage attempt). A newer attempt of a stage
 * fails the waiters of older attempts; every round is bounded by the timeout (the smaller of the
 * registration's and the rank's, counted from the first rank's arrival) and fails naming the
 * missing ranks; a waiting rank that disconnects fails the round for the others at once.
 */
public final class RendezvousService implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(RendezvousService.class);

  /** Replies up to this size are written by the thread that completes the round. */
  private static final int INLINE_REPLY_BYTES = 32 << 10;
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

  /** Tunables (package-private: tests shorten the handshake timeout). */
  static final class Settings {
    /** A connection must complete its request within this time, else it is dropped. */
    long handshakeTimeoutMs = 10_000;
    /** Most connections handled at once; more are closed on accept. */
    int maxConnections = 4096;

    Settings handshakeTimeoutMs(long ms) {
      this.handshakeTimeoutMs = ms;
      return this;
    }

    Settings maxConnections(int n) {
      this.maxConnections = n;
      return this;
    }
  }

  private final ServerSocket server;
  private final String advertisedHost;
  private final int port;
  private final long handshakeTimeoutMs;
  private final Thread acceptor;
  private final ThreadPoolExecutor connections;
  private final ThreadPoolExecutor replies;
  private final ScheduledThreadPoolExecutor timer;
  private final ConcurrentHashMap<Long, Registration> registrations = new ConcurrentHashMap<>();
  private final Set<Socket> openSockets = ConcurrentHashMap.newKeySet();
  private final AtomicBoolean closed = new AtomicBoolean();

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
    this.advertisedHost = advertisedHost;
    try {
      ServerSocket ss = new ServerSocket();
      ss.setReuseAddress(true);
      ss.bind(new InetSocketAddress(bindAddress, 0), 1024);
      this.server = ss;
    } catch (IOException e) {
      throw new IllegalStateException("cannot start the rendezvous service on " + bindDescription + ": "
          + e.getMessage(), e);
    }
    this.port = server.getLocalPort();
    this.connections = new ThreadPoolExecutor(0, settings.maxConnections, 30, TimeUnit.SECONDS,
        new SynchronousQueue<>(), daemonThreads("npugather-rendezvous-" + id + "-conn-"));
    this.replies = new ThreadPoolExecutor(0, Integer.MAX_VALUE, 30, TimeUnit.SECONDS,
        new SynchronousQueue<>(), daemonThreads("npugather-rendezvous-" + id + "-reply-"));
    this.timer = new ScheduledThreadPoolExecutor(1, daemonThreads("npugather-rendezvous-" + id + "-timer-"));
    this.timer.setRemoveOnCancelPolicy(true);
    this.sparkContext = sc;
    this.acceptor = daemonThreads("npugather-rendezvous-" + id + "-acceptor-").newThread(this::acceptLoop);
    this.acceptor.start();
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
    replies.shutdown();
    try {
      replies.awaitTermination(1, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    for (Socket s : openSockets) {
      closeQuietly(s);
    }
    connections.shutdownNow();
    replies.shutdownNow();
    acceptor.interrupt();
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
    return openSockets.size();
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
  // Connections

  private void acceptLoop() {
    while (!closed.get()) {
      Socket socket;
      try {
        socket = server.accept();
      } catch (IOException e) {
        if (closed.get()) {
          return;
        }
        LOG.warn("rendezvous service: accept failed: {}", e.toString());
        try {
          Thread.sleep(50); // e.g. out of file descriptors: do not spin
        } catch (InterruptedException ie) {
          return;
        }
        continue;
      }
      openSockets.add(socket);
      try {
        connections.execute(() -> handle(socket));
      } catch (RejectedExecutionException e) {
        LOG.warn("rendezvous service: too many connections, dropping one from {}",
            socket.getRemoteSocketAddress());
        dropSocket(socket);
      }
      if (closed.get()) {
        dropSocket(socket);
      }
    }
  }

  private void handle(Socket socket) {
    Round joined = null;
    Waiter waiter = null;
    try {
      socket.setTcpNoDelay(true);
      socket.setKeepAlive(true);
      socket.setSoTimeout((int) Math.min(Integer.MAX_VALUE, Math.max(1, handshakeTimeoutMs)));
      OutputStream out = socket.getOutputStream();
      DataInputStream in = new DataInputStream(new BufferedInputStream(socket.getInputStream(), 4096));

      byte[] nonce = new byte[Protocol.NONCE_BYTES];
      RANDOM.nextBytes(nonce);
      ByteBuffer hello = ByteBuffer.allocate(8 + Protocol.NONCE_BYTES);
      hello.putInt(Protocol.HELLO_MAGIC).putInt(Protocol.VERSION).put(nonce);
      out.write(hello.array());

      byte[] header = new byte[Protocol.REQUEST_HEADER_BYTES];
      in.readFully(header);
      ByteBuffer h = ByteBuffer.wrap(header);
      if (h.getInt() != Protocol.REQUEST_MAGIC) {
        LOG.debug("rendezvous service: dropping a connection from {} (not a rendezvous request)",
            socket.getRemoteSocketAddress());
        return;
      }
      int version = h.getInt();
      long registrationId = h.getLong();
      int stageId = h.getInt();
      int stageAttempt = h.getInt();
      int rank = h.getInt();
      long timeoutMs = h.getLong();
      int entryLength = h.getInt();
      byte[] mac = new byte[Protocol.MAC_BYTES];
      in.readFully(mac);
      if (version != Protocol.VERSION) {
        reject(socket, in, out, Reason.CONNECTION, "unsupported rendezvous protocol version " + version
            + " (the service speaks " + Protocol.VERSION + ")");
        return;
      }
      Registration reg = registrations.get(registrationId);
      if (reg == null) {
        reject(socket, in, out, Reason.UNKNOWN_REGISTRATION, "unknown registration " + registrationId
            + " (it was unregistered because its job ended, or the service restarted)");
        return;
      }
      if (!Protocol.macMatches(reg.secret, nonce, header, mac)) {
        LOG.warn("rendezvous service: authentication failed for registration {} from {}", registrationId,
            socket.getRemoteSocketAddress());
        reject(socket, in, out, Reason.AUTHENTICATION, "authentication failed for registration "
            + registrationId + " (the ticket's secret was not accepted)");
        return;
      }
      String problem = null;
      Reason reason = Reason.INVALID_ARGUMENT;
      if (rank < 0 || rank >= reg.rankSize) {
        problem = "rank " + rank + " is out of range [0, " + reg.rankSize + ")";
      } else if (stageId < 0 || stageAttempt < 0) {
        problem = "stage id and attempt must be >= 0, got stage " + stageId + " attempt " + stageAttempt;
      } else if (timeoutMs <= 0) {
        problem = "timeout must be positive, got " + timeoutMs + " ms";
      } else if (entryLength < 0 || entryLength > Protocol.MAX_ENTRY_BYTES) {
        reason = Reason.TOO_LARGE;
        problem = "entry of " + entryLength + " bytes exceeds the limit of " + Protocol.MAX_ENTRY_BYTES
            + " bytes (1 MiB)";
      }
      if (problem != null) {
        reject(socket, in, out, reason, problem);
        return;
      }
      byte[] entry = new byte[entryLength];
      in.readFully(entry);

      waiter = new Waiter(socket, out, rank);
      Rejection rejection = join(reg, stageId, stageAttempt, rank, Math.min(timeoutMs, MAX_TIMEOUT_MS), entry, waiter);
      if (rejection != null) {
        reject(socket, in, out, rejection.reason, rejection.message);
        return;
      }
      joined = waiter.round;
      // Wait for the peer to go away: it closes after reading the reply; an earlier close (task
      // cancelled or failed) makes it leave the round. The reply writer closes the socket too.
      socket.setSoTimeout(0);
      int extra = in.read();
      if (extra >= 0) {
        LOG.debug("rendezvous service: unexpected data from rank {} after its request", rank);
      }
    } catch (SocketTimeoutException e) {
      LOG.debug("rendezvous service: dropping a stalled connection from {}", socket.getRemoteSocketAddress());
    } catch (IOException | RuntimeException e) {
      LOG.debug("rendezvous service: connection from {} ended: {}", socket.getRemoteSocketAddress(), e.toString());
    } finally {
      if (joined != null) {
        left(joined, waiter);
      }
      dropSocket(socket);
    }
  }

  /** Sends an error to a peer whose request is refused, then lets it read it before closing. */
  private static void reject(Socket socket, InputStream in, OutputStream out, Reason reason, String message) {
    try {
      out.write(Protocol.errorFrame(reason, message));
      out.flush();
      socket.shutdownOutput();
      // Drain what the peer still sends (e.g. the entry) so that closing does not reset the
      // connection before the peer has read the error; bounded in bytes and time.
      long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(DRAIN_MS);
      long budget = Protocol.MAX_ENTRY_BYTES + 64L * 1024;
      byte[] sink = new byte[8192];
      while (budget > 0) {
        long left = TimeUnit.NANOSECONDS.toMillis(until - System.nanoTime());
        if (left <= 0) {
          break;
        }
        socket.setSoTimeout((int) left);
        int n = in.read(sink, 0, (int) Math.min(sink.length, budget));
        if (n < 0) {
          break;
        }
        budget -= n;
      }
    } catch (IOException e) {
      // the peer is gone; nothing more to do
    }
  }

  private void dropSocket(Socket socket) {
    closeQuietly(socket);
    openSockets.remove(socket);
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
      byte[] frame = Protocol.replyFrame(entries); // built once: every rank gets the same bytes
      for (Waiter w : waiters) {
        w.send(frame);
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
    byte[] frame = Protocol.errorFrame(reason, message);
    after.add(() -> {
      for (Waiter w : waiters) {
        if (w != null) {
          w.send(frame);
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
    final Socket socket;
    final OutputStream out;
    final int rank;
    final AtomicBoolean answered = new AtomicBoolean();
    Round round;

    Waiter(Socket socket, OutputStream out, int rank) {
      this.socket = socket;
      this.out = out;
      this.rank = rank;
    }

    void send(byte[] frame) {
      if (!answered.compareAndSet(false, true)) {
        return;
      }
      if (frame.length <= INLINE_REPLY_BYTES) {
        write(frame);
      } else {
        try {
          replies.execute(() -> write(frame));
        } catch (RejectedExecutionException e) {
          dropSocket(socket);
        }
      }
    }

    private void write(byte[] frame) {
      try {
        out.write(frame);
        out.flush();
      } catch (IOException e) {
        LOG.debug("rendezvous service: could not answer rank {}: {}", rank, e.toString());
      } finally {
        dropSocket(socket);
      }
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
