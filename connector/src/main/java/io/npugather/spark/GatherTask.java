package io.npugather.spark;

import io.npugather.block.BlockLayout;
import io.npugather.block.LocalBlock;
import io.npugather.block.ReceiveDisplacements;
import io.npugather.spark.arrow.read.GatheredPartitions;
import io.npugather.spark.arrow.write.PartitionWriter;
import io.npugather.spark.memory.GatherMemory;
import io.npugather.spark.output.GatheredOutput;
import io.npugather.spark.rendezvous.RendezvousTicket;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.spark.BarrierTaskContext;
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
 * output, which the executor keeps for later stages ({@code io.npugather.spark.output}); on
 * failure it is released when the task completes.
 */
public final class GatherTask implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final Logger LOG = LoggerFactory.getLogger(GatherTask.class);

  private final StructType schema;
  private final String timeZoneId;
  private final AllGatherOptions options;
  private final DeviceBinding devices;
  private final RendezvousTicket ticket;
  private final String runDomain;
  private final GatherMetrics metrics;

  GatherTask(StructType schema, String timeZoneId, AllGatherOptions options,
      DeviceBinding devices, RendezvousTicket ticket, String runDomain, GatherMetrics metrics) {
    this.schema = schema;
    this.timeZoneId = timeZoneId;
    this.options = options;
    this.devices = devices;
    this.ticket = ticket;
    this.runDomain = runDomain;
    this.metrics = metrics;
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
   * Gathers a partition of a DataFrame cached in Spark's default format, read from the cached
   * bytes ({@code columns}: each field's buffer index in a cached batch).
   */
  public GatheredOutput runOnCachedBatches(Iterator<CachedBatch> batches, int[] columns) {
    return run(allocator ->
        PartitionWriter.fromCachedBatches(batches, columns, schema, timeZoneId, allocator));
  }

  private interface Conversion {
    LocalBlock convert(BufferAllocator allocator);
  }

  private GatheredOutput run(Conversion conversion) {
    BarrierTaskContext context = BarrierTaskContext.get();
    int rank = context.partitionId();
    int rankSize = ticket.rankSize();
    String where = "allGatherOnNpu rank " + rank + "/" + rankSize + " (stage " + context.stageId()
        + "." + context.stageAttemptNumber() + ")";
    TaskResources resources = new TaskResources(GatherMemory.newTaskAllocator(
        "npugather-rank-" + rank + "-task-" + context.taskAttemptId()));
    TaskCompletionListener release = ctx -> resources.close();
    context.addTaskCompletionListener(release);
    try {
      long t0 = System.nanoTime();
      LocalBlock own = conversion.convert(resources.allocator);
      resources.own = own;
      long ownBytes = resources.allocator.getAllocatedMemory();
      long t1 = System.nanoTime();

      RankGroup group = RankGroup.meet(context, options, devices, ticket,
          own.layout().toBytes());
      resources.group = group;
      List<BlockLayout> layouts = new ArrayList<>(rankSize);
      long[] blockBytes = new long[rankSize];
      for (RankEntry entry : group.entries()) {
        BlockLayout layout = BlockLayout.fromBytes(entry.payload());
        blockBytes[layouts.size()] = layout.blockBytes();
        layouts.add(layout);
      }
      group.checkReceiveFits(blockBytes);
      long t2 = System.nanoTime();

      group.connect(runDomain);
      String transport = group.communicator().transport();
      int device = group.entries().get(rank).deviceId();
      if (options.failureInjectedFor(rank, context.stageAttemptNumber())) {
        // As a rank that dies in the collective: its peers see it fail at once.
        throw new IllegalStateException(where + ": failure injected by "
            + AllGatherOptions.INJECT_FAILURE);
      }

      // This rank's own block is served from its input vectors: the receive buffer holds
      // only the peers' blocks, 8-byte aligned.
      ReceiveDisplacements placement = ReceiveDisplacements.of(layouts, rank);
      long[] counts = placement.counts();
      long[] displs = placement.displacements();
      long received = placement.totalBytes();
      ArrowBuf recv = received == 0 ? null : resources.allocator.buffer(received);
      try {
        group.communicator().allGatherVSegments(own.segmentAddresses(), own.segmentLengths(),
            recv, counts, displs);
        resources.closeCommunicator();
        resources.gathered = GatheredPartitions.wrap(recv, layouts, displs, rank, own, schema,
            resources.allocator);
      } finally {
        if (recv != null) {
          recv.close(); // the gathered partitions hold their own reference
        }
      }
      long t3 = System.nanoTime();

      long rows = resources.gathered.totalRows();
      metrics.addTask(counts[rank] * (rankSize - 1), received, rows, t1 - t0, t2 - t1, t3 - t2);
      metrics.addRankData(own.layout().rowCount(), counts[rank], Arrays.stream(counts).sum());
      metrics.addRankGroup(group.exchangeNanos(), transport);
      // The batches handed out below are slices: no allocation after this point.
      metrics.addMemory(ownBytes, resources.allocator.getPeakMemoryAllocation());
      LOG.info("{}: gathered {} rows over {}{}, {} bytes received, {} sent; conversion"
          + " {} ms, rendezvous {} ms, collective {} ms", where, rows, transport,
          device < 0 ? "" : " (device " + device + ")", received,
          counts[rank] * (rankSize - 1),
          (t1 - t0) / 1_000_000, (t2 - t1) / 1_000_000, (t3 - t2) / 1_000_000);
      return resources.handOver(rank);
    } catch (RuntimeException | Error e) {
      resources.abortCommunicator();
      throw e;
    }
  }

  /** Everything one task owns; closed once, in reverse order of creation. */
  private static final class TaskResources {
    final BufferAllocator allocator;
    LocalBlock own;
    RankGroup group;
    GatheredPartitions gathered;
    GatheredOutput output;

    TaskResources(BufferAllocator allocator) {
      this.allocator = allocator;
    }

    synchronized void abortCommunicator() {
      if (group != null) {
        group.abort(); // peers fail at once instead of waiting for the timeout
      }
    }

    synchronized void closeCommunicator() {
      if (group != null) {
        group.close();
      }
    }

    /** The gathered partitions with the memory they live in, owned from now on by the output. */
    synchronized GatheredOutput handOver(int rank) {
      output = new GatheredOutput(allocator, own, gathered, rank);
      return output;
    }

    synchronized void close() {
      RuntimeException first = null;
      try {
        closeCommunicator();
      } catch (RuntimeException e) {
        first = e;
      }
      if (output != null) {
        output.closeUnlessKept(); // kept by the executor once the stage's writer took it
      } else {
        if (gathered != null) {
          gathered.close();
        }
        if (own != null) {
          own.close();
        }
        try {
          allocator.close(); // throws if anything leaked
        } catch (RuntimeException e) {
          if (first == null) {
            first = e;
          }
        }
      }
      if (first != null) {
        LOG.warn("allGatherOnNpu: releasing task resources failed", first);
      }
    }
  }
}
