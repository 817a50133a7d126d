package io.npugather.spark;

import io.npugather.AllGatherParam;
import io.npugather.Backend;
import io.npugather.CommMode;
import io.npugather.Communicator;
import io.npugather.CommunicatorOptions;
import io.npugather.NpuGatherException;
import io.npugather.ResultCode;
import io.npugather.RootInfo;
import io.npugather.block.BlockLayout;
import io.npugather.spark.memory.GatherMemory;
import io.npugather.spark.rendezvous.RendezvousClient;
import io.npugather.spark.rendezvous.RendezvousTicket;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.UUID;
import org.apache.spark.BarrierTaskContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The ranks of one barrier stage joined into a communicator, seen from one rank (one barrier task):
 * one rendezvous round through the driver, then the communicator.
 *
 * <p>{@link #meet} runs the round: the root rank creates the root info, every rank sends a {@link
 * RankEntry} (host, device, root info, the caller's payload) and receives all of them; two ranks on
 * one device of one host fail every rank. {@link #connect} then creates the communicator in the
 * run's domain and starts a watchdog that aborts a blocked collective when Spark kills the task.
 * {@link #close()} stops the watchdog and closes the communicator.
 */
final class RankGroup implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(RankGroup.class);

  /** Largest LCCL domain id the connector uses: 10067 + 55000 is still a port. */
  static final int MAX_LCCL_DOMAIN_ID = 55_000;

  private final BarrierTaskContext context;
  private final AllGatherOptions options;
  private final CommunicatorOptions commOptions;
  private final List<RankEntry> entries;
  private final long exchangeNanos;
  private RootInfo createdRootInfo; // this rank's, when it is the root
  private Communicator communicator;
  private Thread watchdog;

  private RankGroup(
      BarrierTaskContext context,
      AllGatherOptions options,
      CommunicatorOptions commOptions,
      List<RankEntry> entries,
      long exchangeNanos,
      RootInfo createdRootInfo) {
    this.context = context;
    this.options = options;
    this.commOptions = commOptions;
    this.entries = entries;
    this.exchangeNanos = exchangeNanos;
    this.createdRootInfo = createdRootInfo;
  }

  /**
   * The rendezvous round of this task's stage attempt: every rank's entry, identical on every rank.
   * Rank = partition id, rankSize = the ticket's; the rank's device as {@code devices} says.
   *
   * @throws NpuGatherException {@link ResultCode#INVALID_USAGE} when two ranks were given the same
   *     device of one host, or an entry of another version; {@link ResultCode#REMOTE_ERROR} when an
   *     entry is malformed
   * @throws io.npugather.spark.rendezvous.RendezvousException when the round fails
   */
  static RankGroup meet(
      BarrierTaskContext context,
      AllGatherOptions options,
      DeviceBinding devices,
      RendezvousTicket ticket,
      byte[] payload) {
    int rank = context.partitionId();
    int rankSize = ticket.rankSize();
    CommunicatorOptions commOptions =
        CommunicatorOptions.defaults()
            .withTimeout(options.timeout())
            .withHostTransport(options.hostTransport())
            .withDeviceId(devices.deviceId(context));
    RootInfo created =
        rank == options.rankRoot()
            ? Communicator.createRootInfo(options.backend(), commOptions)
            : null;
    try {
      byte[] rootInfo = created == null ? new byte[0] : created.toBytes();
      GatherMemory.ReceiveLimit limit = GatherMemory.receiveLimit();
      RankEntry mine =
          new RankEntry(
              hostName(),
              RankEntry.THIS_PROCESS,
              commOptions.deviceId(),
              limit.bytes(),
              limit.source(),
              rootInfo,
              payload);
      long sent = System.nanoTime();
      List<byte[]> table =
          RendezvousClient.exchange(
              ticket,
              context.stageId(),
              context.stageAttemptNumber(),
              rank,
              mine.toBytes(),
              options.timeout(),
              context::isInterrupted);
      long exchangeNanos = System.nanoTime() - sent;
      List<RankEntry> entries = new ArrayList<>(rankSize);
      for (int r = 0; r < rankSize; r++) {
        entries.add(RankEntry.fromBytes(rank, r, table.get(r)));
      }
      String sharedDevice = sharedDevice(entries, options);
      if (sharedDevice != null) {
        // Spark reports one failed task of a barrier stage; every rank's verdict goes to its log.
        LOG.error(
            "rank {}/{} (stage {}.{}): {}",
            rank,
            rankSize,
            context.stageId(),
            context.stageAttemptNumber(),
            sharedDevice);
        throw new NpuGatherException(
            ResultCode.INVALID_USAGE, RankEntry.OPERATION, rank, sharedDevice);
      }
      return new RankGroup(
          context,
          options,
          commOptions,
          Collections.unmodifiableList(entries),
          exchangeNanos,
          created);
    } catch (RuntimeException | Error e) {
      // The communicator will not be created: the root's listener must not stay parked.
      if (created != null) {
        try {
          created.close();
        } catch (RuntimeException closing) {
          e.addSuppressed(closing);
        }
      }
      throw e;
    }
  }

  int rank() {
    return context.partitionId();
  }

  int rankSize() {
    return entries.size();
  }

  /**
   * Time from sending this rank's entry to receiving the table: the service answers when the last
   * rank arrives, so this is how long the rank waited for the slowest one.
   */
  long exchangeNanos() {
    return exchangeNanos;
  }

  /** Every rank's entry, indexed by rank. */
  List<RankEntry> entries() {
    return entries;
  }

  /**
   * Creates this rank's communicator in the domain of this stage attempt ({@link #commDomain}, so a
   * retried stage never meets its failed attempt) and starts the kill watchdog.
   */
  Communicator connect(String runDomain) {
    return connect(runDomain, rank(), rankSize(), options.rankRoot());
  }

  /**
   * {@link #connect(String)} as rank {@code commRank} of a communicator of {@code commSize} ranks
   * whose root, {@code commRoot}, runs in the process of the run's root rank and so can take the
   * root info that rank made: how one rank per executor connects when the ranks of an executor
   * gather one output together ({@link ExecutorGroups}).
   */
  Communicator connect(String runDomain, int commRank, int commSize, int commRoot) {
    synchronized (this) {
      if (communicator != null) {
        throw new IllegalStateException("rank " + rank() + " is already connected");
      }
    }
    AllGatherParam param =
        AllGatherParam.builder()
            .backend(options.backend())
            .rank(commRank)
            .rankSize(commSize)
            .rankRoot(commRoot)
            .commMode(CommMode.COMM_MULTI_PROCESS)
            .commDomain(
                commDomain(
                    options.backendType(),
                    runDomain,
                    context.stageId(),
                    context.stageAttemptNumber()))
            .build();
    RootInfo root = RootInfo.of(options.backend(), entries.get(options.rankRoot()).rootInfo());
    Communicator created = Communicator.create(param, root, commOptions);
    synchronized (this) {
      communicator = created;
      watchForKill(created);
    }
    return created;
  }

  /**
   * The commDomain of one stage attempt of a run: {@code runDomain + "-s<stage>a<attempt>"}; for a
   * backend with a {@link Backend#numberedDomain()} (lccl), whose multi-process domain must be
   * "ID:SIZE_MB" and whose bootstrap listens on port 10067 + ID of the host, {@code "ID:200"} with
   * ID hashed from that name into [0, {@value #MAX_LCCL_DOMAIN_ID}] (10067 + ID stays a valid
   * port), so concurrent jobs and attempts on one host get their own port.
   */
  static String commDomain(Backend backend, String runDomain, int stage, int attempt) {
    String name = runDomain + "-s" + stage + "a" + attempt;
    if (!backend.numberedDomain()) {
      return name;
    }
    long hash =
        UUID.nameUUIDFromBytes(name.getBytes(StandardCharsets.UTF_8)).getMostSignificantBits();
    long id = Math.floorMod(hash, MAX_LCCL_DOMAIN_ID + 1L);
    return id + ":" + AllGatherParam.MIN_LCCL_BUFFER_MB;
  }

  /**
   * Releases the root info this rank made (the host backend's listening endpoint) when no
   * communicator will be created from it: the ranks of the run all share one executor. No-op on
   * other ranks.
   */
  synchronized void releaseUnusedRootInfo() {
    if (createdRootInfo != null) {
      RootInfo unused = createdRootInfo;
      createdRootInfo = null;
      unused.close();
    }
  }

  /** The communicator, or null before {@link #connect}. */
  synchronized Communicator communicator() {
    return communicator;
  }

  /** A killed task (job cancelled, stage failed) aborts a blocked collective at once. */
  private void watchForKill(Communicator watched) {
    watchdog =
        new Thread(
            () -> {
              try {
                while (watched.isOpen()) {
                  if (context.isInterrupted()) {
                    watched.abort();
                    return;
                  }
                  Thread.sleep(50);
                }
              } catch (InterruptedException | IllegalStateException e) {
                // Stopped, or the communicator closed in between: nothing to abort.
              }
            },
            "npugather-kill-watch-" + context.partitionId());
    watchdog.setDaemon(true);
    watchdog.start();
  }

  /** Makes the peers fail at once instead of waiting for the timeout; never throws. */
  synchronized void abort() {
    if (communicator != null && communicator.isOpen()) {
      try {
        communicator.abort();
      } catch (RuntimeException ignored) {
        // Closing reports what matters.
      }
    }
  }

  /** Stops the watchdog and closes the communicator if open; idempotent. */
  @Override
  public synchronized void close() {
    if (watchdog != null) {
      watchdog.interrupt();
    }
    if (communicator != null && communicator.isOpen()) {
      communicator.close();
    }
  }

  /**
   * Checks, before any buffer is allocated, that every rank can receive the blocks of the others
   * ({@code blockBytes[r]}: rank r's block) within its limit; every rank runs the same check on the
   * same table, so all fail together with the same error.
   *
   * @throws NpuGatherException {@link ResultCode#INVALID_USAGE} naming the rank, the bytes it
   *     needs, its limit and the settings
   */
  void checkReceiveFits(long[] blockBytes) {
    checkReceiveFits(rank(), entries, blockBytes);
  }

  /**
   * {@link #checkReceiveFits(long[])} of the table {@code entries}, as rank {@code reporter} runs
   * it.
   */
  static void checkReceiveFits(int reporter, List<RankEntry> entries, long[] blockBytes) {
    long total = 0;
    for (long b : blockBytes) {
      total = Math.addExact(total, BlockLayout.align8(b));
    }
    for (int r = 0; r < entries.size(); r++) {
      long needed = total - BlockLayout.align8(blockBytes[r]);
      RankEntry e = entries.get(r);
      if (needed > e.receiveLimit()) {
        throw new NpuGatherException(
            ResultCode.INVALID_USAGE,
            RankEntry.OPERATION,
            reporter,
            "rank "
                + r
                + " (on "
                + e.host()
                + ") would receive "
                + needed
                + " bytes ("
                + mebibytes(needed)
                + ") in this gather, more than its limit of "
                + e.receiveLimit()
                + " bytes ("
                + mebibytes(e.receiveLimit())
                + ") from "
                + e.receiveLimitSource()
                + "; "
                + raiseTheLimit(e.receiveLimitSource())
                + " (or gather fewer rows or columns)");
      }
    }
  }

  /**
   * What to raise after "from SOURCE": the source, or {@link GatherMemory#MAX_GATHER_BYTES} where
   * the source is another limit; the setting is named once either way.
   */
  private static String raiseTheLimit(String source) {
    return source.startsWith(GatherMemory.MAX_GATHER_BYTES + "=")
        ? "raise it"
        : "raise that setting or set " + GatherMemory.MAX_GATHER_BYTES;
  }

  private static String mebibytes(long bytes) {
    return String.format(java.util.Locale.ROOT, "%.1f MiB", bytes / (double) (1L << 20));
  }

  /**
   * What is wrong when two ranks were given one device of one host (the spec allows one
   * communicating process per device), else null.
   */
  private static String sharedDevice(List<RankEntry> entries, AllGatherOptions options) {
    for (int a = 0; a < entries.size(); a++) {
      for (int b = a + 1; b < entries.size(); b++) {
        RankEntry x = entries.get(a);
        RankEntry y = entries.get(b);
        if (x.deviceId() >= 0 && x.deviceId() == y.deviceId() && x.host().equals(y.host())) {
          return "ranks "
              + a
              + " and "
              + b
              + " were both given device "
              + x.deviceId()
              + " of host "
              + x.host()
              + " (Spark resource '"
              + options.resourceName()
              + "'); only one communicating process per device is"
              + " allowed: give every task its own device (spark.task.resource."
              + options.resourceName()
              + ".amount=1 and enough devices per executor)";
        }
      }
    }
    return null;
  }

  private static String hostName() {
    try {
      return InetAddress.getLocalHost().getHostName();
    } catch (UnknownHostException e) {
      return "unknown-host";
    }
  }
}
