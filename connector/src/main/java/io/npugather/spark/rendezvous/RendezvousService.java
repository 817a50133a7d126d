package io.npugather.spark.rendezvous;

import io.npugather.CommunicatorOptions;
import io.npugather.spark.rendezvous.RendezvousException.Reason;
import java.lang.ref.Cleaner;
import java.lang.ref.WeakReference;
import java.net.InetAddress;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.SparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Driver-side rendezvous service: every rank of a barrier stage sends one small entry and gets back
 * the table of all ranks' entries, indexed by rank and identical on every rank. The reply goes out
 * the moment the last rank's entry arrives.
 *
 * <p>One service per {@link SparkContext} ({@link #getOrStart}), started lazily on the driver's
 * address ({@link DriverAddress}) and stopped when the SparkContext stops. It puts together the
 * parts of the rendezvous: {@link RendezvousServer} (the TCP server, one selector thread, whose
 * connections authenticate and follow {@link Protocol}), {@link Rounds} (registrations and their
 * rounds: arrivals, deadlines, failures, verdicts) and {@link JobWatches} (registrations that end
 * with a Spark job).
 *
 * <p>Rounds are keyed by (registration, stage id, stage attempt). A newer attempt of a stage fails
 * the waiters of older attempts; every round is bounded by the timeout (the smaller of the
 * registration's and the rank's, counted from the first rank's arrival) and fails naming the
 * missing ranks; a waiting rank that disconnects fails the round for the others at once.
 */
public final class RendezvousService implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(RendezvousService.class);

  /**
   * Longest timeout honoured, the communicator's ({@link CommunicatorOptions#MAX_TIMEOUT}, which
   * the options refuse to pass; keeps nanoTime arithmetic far from overflow).
   */
  static final long MAX_TIMEOUT_MS = CommunicatorOptions.MAX_TIMEOUT.toMillis();

  private static final Map<SparkContext, RendezvousService> BY_CONTEXT = new IdentityHashMap<>();
  private static final AtomicLong NEXT_REGISTRATION_ID = new AtomicLong(1);
  private static final SecureRandom RANDOM = new SecureRandom();
  private static final AtomicInteger SERVICE_COUNTER = new AtomicInteger();
  private static final Cleaner CLEANER =
      Cleaner.create(daemonThreads("npugather-rendezvous-cleaner-"));

  private final String advertisedHost;
  private final int port;
  private final ScheduledThreadPoolExecutor timer;
  private final RendezvousServer server;
  private final Rounds<RendezvousServer.Seat> rounds;
  private final JobWatches jobWatches = new JobWatches();
  private final AtomicBoolean closed = new AtomicBoolean();

  private final SparkContext sparkContext; // null when started without Spark (tests)
  private final SparkListener listener; // null when started without Spark

  // ---------------------------------------------------------------------------------------------
  // Life cycle

  /**
   * The service of this SparkContext, started on first use. It stops when the SparkContext stops
   * (application end) or when {@link #close()} is called; a closed service is replaced by a new one
   * on the next call.
   *
   * @throws IllegalStateException if the SparkContext is stopped
   */
  public static RendezvousService getOrStart(SparkContext sc) {
    Objects.requireNonNull(sc, "sc");
    List<RendezvousService> stale = new ArrayList<>();
    RendezvousService service;
    synchronized (BY_CONTEXT) {
      for (Iterator<Map.Entry<SparkContext, RendezvousService>> it =
              BY_CONTEXT.entrySet().iterator();
          it.hasNext(); ) {
        Map.Entry<SparkContext, RendezvousService> e = it.next();
        if (e.getKey().isStopped() || e.getValue().closed.get()) {
          stale.add(e.getValue());
          it.remove();
        }
      }
      if (sc.isStopped()) {
        closeAll(stale);
        throw new IllegalStateException(
            "cannot start the rendezvous service: the SparkContext is stopped");
      }
      service = BY_CONTEXT.get(sc);
      if (service == null) {
        service =
            new RendezvousService(DriverAddress.of(sc.getConf()), sc, RendezvousSettings.DEFAULTS);
        BY_CONTEXT.put(sc, service);
      }
    }
    closeAll(stale);
    if (sc.isStopped()) { // stopped while we started: the listener may never hear the end
      service.close();
      throw new IllegalStateException(
          "cannot start the rendezvous service: the SparkContext is stopped");
    }
    return service;
  }

  private static void closeAll(List<RendezvousService> services) {
    for (RendezvousService s : services) {
      s.close();
    }
  }

  /** A service without a SparkContext, bound to {@code bindAddress} (tests, benchmarks). */
  static RendezvousService startStandalone(InetAddress bindAddress, RendezvousSettings settings) {
    return new RendezvousService(DriverAddress.standalone(bindAddress), null, settings);
  }

  private RendezvousService(DriverAddress address, SparkContext sc, RendezvousSettings settings) {
    int id = SERVICE_COUNTER.incrementAndGet();
    this.advertisedHost = address.advertisedHost();
    this.timer =
        new ScheduledThreadPoolExecutor(1, daemonThreads("npugather-rendezvous-" + id + "-timer-"));
    this.timer.setRemoveOnCancelPolicy(true);
    try {
      this.server =
          new RendezvousServer(
              address, settings, timer, "npugather-rendezvous-" + id + "-selector-1");
    } catch (RuntimeException e) {
      timer.shutdownNow();
      throw e;
    }
    this.rounds = server.rounds();
    this.port = server.port();
    this.sparkContext = sc;
    if (sc != null) {
      this.listener = JobWatches.listener(this);
      sc.addSparkListener(listener);
    } else {
      this.listener = null;
    }
    LOG.info(
        "NpuGather rendezvous service listening on {}:{} (advertised as {})",
        address.bind().getHostAddress(),
        port,
        advertisedHost);
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
    server.closeListener();
    rounds.removeAll(
        Reason.UNKNOWN_REGISTRATION,
        "the rendezvous service stopped (the SparkContext stopped " + "or the service was closed)");
    jobWatches.clear();
    timer.shutdownNow();
    // The selector thread sends the verdicts just queued (for a second at most), then closes all.
    server.stop();
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
      throw new IllegalArgumentException(
          "rankSize must be in [1, " + Protocol.MAX_RANKS + "], got " + rankSize);
    }
    Objects.requireNonNull(timeout, "timeout");
    if (timeout.isNegative() || timeout.isZero()) {
      throw new IllegalArgumentException("timeout must be positive, got " + timeout);
    }
    ensureOpen();
    byte[] secret = new byte[Protocol.SECRET_BYTES];
    RANDOM.nextBytes(secret);
    long id = NEXT_REGISTRATION_ID.getAndIncrement();
    rounds.register(id, rankSize, secret, millis(timeout));
    if (closed.get()) { // raced with close()
      rounds.remove(id, Reason.UNKNOWN_REGISTRATION, "the rendezvous service stopped");
      ensureOpen();
    }
    return new RendezvousTicket(advertisedHost, port, rankSize, id, secret);
  }

  /** Removes the ticket's registration; ranks waiting in its rounds fail at once. Idempotent. */
  public void unregister(RendezvousTicket ticket) {
    Objects.requireNonNull(ticket, "ticket");
    jobWatches.forget(ticket);
    rounds.remove(
        ticket.registrationId(),
        Reason.UNKNOWN_REGISTRATION,
        "registration "
            + ticket.registrationId()
            + " was unregistered (its job ended, failed or was cancelled)");
  }

  /**
   * Unregisters the ticket when the Spark job that runs stage(s) of RDD {@code rddId} ends (the
   * last of them, if several running jobs compute that RDD), so the registration lives as long as
   * that job. A job already running when this is called counts too.
   */
  public void unregisterWhenJobEnds(RendezvousTicket ticket, int rddId) {
    Objects.requireNonNull(ticket, "ticket");
    if (sparkContext == null) {
      // Job events are fed by the test hooks jobStarted/jobEnded.
      LOG.debug(
          "rendezvous service without SparkContext: job watch for rdd {} needs job events", rddId);
    }
    if (rounds.registration(ticket.registrationId()) == null) {
      return; // already gone
    }
    jobWatches.watch(ticket, rddId);
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
    WeakReference<RendezvousService> self = new WeakReference<>(this);
    CLEANER.register(
        owner,
        () -> {
          RendezvousService service = self.get();
          if (service != null) {
            service.unregister(ticket);
          }
        });
  }

  /** Registrations currently held (leaks are visible in tests). */
  public int activeRegistrations() {
    return rounds.size();
  }

  /** Rounds still waiting for ranks, over all registrations (tests). */
  int openRounds() {
    return rounds.openRounds();
  }

  /** Ranks waiting in open rounds, over all registrations (tests). */
  int waitingRanks() {
    return rounds.waitingRanks();
  }

  /** Connections currently open (tests). */
  int openConnections() {
    return server.openConnections();
  }

  private void ensureOpen() {
    if (sparkContext != null && sparkContext.isStopped()) {
      close(); // the application-end event may have been lost; do not outlive the SparkContext
    }
    if (closed.get()) {
      throw new IllegalStateException("the rendezvous service is stopped");
    }
  }

  // Job events (fed by the SparkListener; package-private so tests can drive them directly).

  void jobStarted(int jobId, Set<Integer> rddIds) {
    jobWatches.jobStarted(jobId, rddIds);
  }

  void jobEnded(int jobId) {
    for (RendezvousTicket t : jobWatches.jobEnded(jobId)) {
      unregister(t);
    }
  }

  private static long millis(Duration d) {
    try {
      return Math.min(d.toMillis(), MAX_TIMEOUT_MS);
    } catch (ArithmeticException e) {
      return MAX_TIMEOUT_MS;
    }
  }

  @Override
  public String toString() {
    return "RendezvousService{"
        + advertisedHost
        + ":"
        + port
        + ", registrations="
        + rounds.size()
        + (closed.get() ? ", closed" : "")
        + "}";
  }
}
