package io.npugather.spark;

import io.npugather.Communicator;
import io.npugather.block.BlockLayout;
import io.npugather.block.LocalBlock;
import io.npugather.block.ReceiveDisplacements;
import io.npugather.spark.arrow.read.GatheredPartitions;
import io.npugather.spark.arrow.write.PartitionWriter;
import io.npugather.spark.memory.Prefault;
import io.npugather.spark.output.ExecutorOutput;
import io.npugather.spark.output.GatheredOutput;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.columnar.CachedBatch;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.util.TaskCompletionListener;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One rank of an {@code allGatherOnNpu} run, inside a barrier task: partition to Arrow, one
 * rendezvous round, one all-gather-v, and the gathered partitions out as one {@link
 * GatheredOutput}.
 *
 * <p>Everything the task allocates comes from one child allocator. On success it belongs to the
 * output, which the executor keeps for later stages ({@code io.npugather.spark.output}); on failure
 * it is released when the task completes.
 */
public final class GatherTask implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final Logger LOG = LoggerFactory.getLogger(GatherTask.class);

  private final StructType schema;
  private final String timeZoneId;
  private final RankTask ranks;
  private final boolean shareExecutors;

  /**
   * @param shareExecutors whether the ranks that share an executor gather one output together
   *     ({@link ExecutorGroups}; the host backend only)
   */
  GatherTask(StructType schema, String timeZoneId, RankTask ranks, boolean shareExecutors) {
    this.schema = schema;
    this.timeZoneId = timeZoneId;
    this.ranks = ranks;
    this.shareExecutors = shareExecutors;
  }

  /** Gathers a partition of rows. */
  public GatheredOutput runOnRows(Iterator<InternalRow> rows) {
    return run(allocator -> PartitionWriter.fromRows(rows, schema, timeZoneId, allocator));
  }

  /** Gathers a partition that arrives as columnar batches (no detour through rows). */
  public GatheredOutput runOnBatches(Iterator<ColumnarBatch> batches) {
    return run(allocator -> PartitionWriter.fromBatches(batches, schema, timeZoneId, allocator));
  }

  /**
   * Gathers a partition of a DataFrame cached in Spark's default format, read from the cached bytes
   * ({@code columns}: each field's buffer index in a cached batch).
   */
  public GatheredOutput runOnCachedBatches(Iterator<CachedBatch> batches, int[] columns) {
    return run(
        allocator ->
            PartitionWriter.fromCachedBatches(batches, columns, schema, timeZoneId, allocator));
  }

  private interface Conversion {
    LocalBlock convert(BufferAllocator allocator);
  }

  private GatheredOutput run(Conversion conversion) {
    RankTask.Rank me = ranks.start();
    int rank = me.rank();
    int rankSize = me.rankSize();
    TaskResources resources = new TaskResources(me);
    TaskCompletionListener release = ctx -> resources.close();
    me.context().addTaskCompletionListener(release);
    try {
      LocalBlock own = conversion.convert(me.allocator());
      resources.own = own;
      long ownBytes = me.allocator().getAllocatedMemory();
      me.conversionDone();

      RankGroup group = me.meet(own.layout().toBytes());
      List<BlockLayout> layouts = new ArrayList<>(rankSize);
      long[] blockBytes = new long[rankSize];
      for (RankEntry entry : group.entries()) {
        BlockLayout layout = BlockLayout.fromBytes(entry.payload());
        blockBytes[layouts.size()] = layout.blockBytes();
        layouts.add(layout);
      }
      group.checkReceiveFits(blockBytes);
      me.rendezvousDone();

      boolean share = shareExecutors && !ranks.options().backendType().needsDevice();
      ExecutorGroups executors =
          share
              ? ExecutorGroups.byProcess(group.entries())
              : ExecutorGroups.eachRankAlone(rankSize);
      if (share && executors.executorCount() == 1) {
        group.releaseUnusedRootInfo(); // one executor holds every rank: no communicator
      }
      int leader = executors.leaderOf(rank);
      ExecutorShare meeting =
          ExecutorShare.join(
              me.attemptKey() + "-r" + leader, executors.ranksOf(executors.executorOf(rank)));
      BufferAllocator allocator = me.handOverAllocator();
      resources.share = meeting;
      resources.own = null;
      meeting.contribute(rank, own, allocator); // owned by the meeting from here on

      GatheredOutput output;
      long sent = 0;
      long received = 0;
      if (executors.isLeader(rank)) {
        Gathered gathered = lead(me, meeting, executors, layouts, allocator, share);
        output = gathered.output;
        resources.output = output; // released at the task's end, whatever follows
        sent = gathered.sent;
        received = gathered.received;
      } else {
        me.failIfInjected(); // where a leader fails: before the collective
        output =
            meeting.awaitOutput(
                rank,
                ranks.options().timeout().toMillis(),
                me.context()::isInterrupted,
                me.where());
        resources.output = output; // released at the task's end, whatever follows
        me.recordTransport(output.shared().transport());
      }

      long rows = output.totalRows();
      me.collectiveDone(sent, received, rows);
      long total = Arrays.stream(blockBytes).sum();
      ranks.metrics().addRankData(own.layout().rowCount(), blockBytes[rank], total);
      // The batches handed out below are slices: no allocation after this point.
      ranks.metrics().addMemory(ownBytes, allocator.getPeakMemoryAllocation());
      int device = group.entries().get(rank).deviceId();
      LOG.info(
          "{}: gathered {} rows over {}{}, {} bytes received, {} sent; {}",
          me.where(),
          rows,
          output.shared().transport(),
          device < 0 ? "" : " (device " + device + ")",
          received,
          sent,
          me.timings());
      return output;
    } catch (RuntimeException | Error e) {
      me.abort();
      if (resources.share != null) {
        resources.share.fail(rank, e);
      }
      me.yieldToPeersFailure(e);
      throw e;
    }
  }

  /** What the leader of an executor's ranks made and moved. */
  private record Gathered(GatheredOutput output, long sent, long received) {}

  /**
   * The leader's part: once every rank of its executor has handed over its partition, one
   * all-gather-v among the executors' leaders (each sends its executor's blocks, in rank order,
   * straight from their buffers, and receives the other executors' blocks), then the executor's
   * output over the local partitions and the receive buffer. Without sharing, or with one executor,
   * no other rank: the collective runs over every rank, or not at all.
   */
  private Gathered lead(
      RankTask.Rank me,
      ExecutorShare meeting,
      ExecutorGroups executors,
      List<BlockLayout> layouts,
      BufferAllocator allocator,
      boolean share) {
    int rank = me.rank();
    int executor = executors.executorOf(rank);
    ReceiveDisplacements placement = ReceiveDisplacements.of(layouts, executors.groups(), executor);
    long[] counts = placement.counts();
    long received = placement.totalBytes();
    GatheredPartitions gathered;
    LocalBlock[] blocks;
    String transport = SHARED_TRANSPORT;
    ArrowBuf recv = received == 0 ? null : allocator.buffer(received);
    // The receive buffer's fresh pages are faulted in while this rank connects and waits for its
    // executor's ranks, and ahead of the collective's writes (Prefault).
    try (Prefault prefault = Prefault.start(recv, received)) {
      // Connected first, so that a local rank's failure aborts the communicator and the other
      // executors' leaders fail at once instead of waiting for this one to join.
      Communicator communicator = null;
      if (executors.executorCount() > 1 || !share) {
        communicator =
            me.connect(
                executor,
                executors.executorCount(),
                executors.executorOf(ranks.options().rankRoot()));
        transport = communicator.transport();
      } else {
        me.joined(transport);
      }
      meeting.awaitContributions(
          rank, ranks.options().timeout().toMillis(), me.context()::isInterrupted, me.where());
      blocks = meeting.blocks();
      LocalBlock[] local = new LocalBlock[layouts.size()];
      int[] localRanks = meeting.ranks();
      int segmentCount = 0;
      for (int i = 0; i < localRanks.length; i++) {
        local[localRanks[i]] = blocks[i];
        segmentCount += blocks[i].segmentAddresses().length;
      }
      if (communicator != null) {
        long[] addresses = new long[segmentCount];
        long[] lengths = new long[segmentCount];
        int s = 0;
        for (LocalBlock block : blocks) {
          long[] a = block.segmentAddresses();
          System.arraycopy(a, 0, addresses, s, a.length);
          System.arraycopy(block.segmentLengths(), 0, lengths, s, a.length);
          s += a.length;
        }
        communicator.allGatherVSegments(
            addresses, lengths, recv, counts, placement.displacements());
        me.closeGroup();
      }
      gathered =
          GatheredPartitions.wrap(
              recv, layouts, placement.rankDisplacements(), rank, local, schema, allocator);
    } finally {
      if (recv != null) {
        recv.close(); // the gathered partitions hold their own reference
      }
    }
    List<LocalBlock> owned = new ArrayList<>(Arrays.asList(blocks));
    meeting.complete(
        new ExecutorOutput(
            meeting.allocators(), owned, gathered, transport, meeting.ranks().length));
    long sent = counts[executor] * (executors.executorCount() - 1);
    return new Gathered(meeting.takeOwn(rank), sent, received);
  }

  /**
   * What the output's transport says when one executor held every rank and nothing crossed a
   * process: {@link io.npugather.Backend#transports()} lists it for the host backend.
   */
  static final String SHARED_TRANSPORT = "executor";

  /**
   * What the task owns beyond its {@link RankTask.Rank}; released once, when the task completes:
   * its partition until it hands it to its executor's meeting, its reference to the output (closed
   * unless the executor's block manager keeps it).
   */
  private static final class TaskResources {
    final RankTask.Rank me;
    LocalBlock own;
    ExecutorShare share;
    GatheredOutput output;

    TaskResources(RankTask.Rank me) {
      this.me = me;
    }

    synchronized void close() {
      Throwable first =
          output != null
              ? me.release(null, output::closeUnlessKept) // kept once the stage's writer took it
              : me.release(null, own);
      if (first != null) {
        LOG.warn("allGatherOnNpu: releasing task resources failed", first);
      }
    }
  }
}
