package io.npugather.spark;

import io.npugather.spark.arrow.GatheredPartitions;
import io.npugather.spark.arrow.PartitionBuffers;
import io.npugather.spark.arrow.PartitionLayout;
import io.npugather.spark.rendezvous.RendezvousTicket;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
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
 * rendezvous round, one all-gather-v, and the gathered partitions out as columnar batches.
 *
 * <p>Everything the task allocates comes from one child allocator and is released when the task
 * completes (success or failure), after Spark has consumed the batches.
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
  public Iterator<ColumnarBatch> runOnRows(Iterator<InternalRow> rows) {
    return run(allocator -> PartitionBuffers.fromRows(rows, schema, timeZoneId, allocator));
  }

  /** Gathers a partition that arrives as columnar batches (no detour through rows). */
  public Iterator<ColumnarBatch> runOnBatches(Iterator<ColumnarBatch> batches) {
    return run(allocator -> PartitionBuffers.fromBatches(batches, schema, timeZoneId, allocator));
  }

  /**
   * Gathers a partition of a DataFrame cached in Spark's default format, read from the cached
   * bytes ({@code columns}: each field's buffer index in a cached batch).
   */
  public Iterator<ColumnarBatch> runOnCachedBatches(Iterator<CachedBatch> batches, int[] columns) {
    return run(allocator ->
        PartitionBuffers.fromCachedBatches(batches, columns, schema, timeZoneId, allocator));
  }

  private interface Conversion {
    PartitionBuffers convert(BufferAllocator allocator);
  }

  private Iterator<ColumnarBatch> run(Conversion conversion) {
    BarrierTaskContext context = BarrierTaskContext.get();
    int rank = context.partitionId();
    int rankSize = ticket.rankSize();
    TaskResources resources = new TaskResources(GatherMemory.newTaskAllocator(
        "npugather-rank-" + rank + "-task-" + context.taskAttemptId()));
    TaskCompletionListener release = ctx -> resources.close();
    context.addTaskCompletionListener(release);
    String where = "allGatherOnNpu rank " + rank + "/" + rankSize + " (stage " + context.stageId()
        + "." + context.stageAttemptNumber() + ")";
    try {
      long t0 = System.nanoTime();
      PartitionBuffers own = conversion.convert(resources.allocator);
      resources.own = own;
      long ownBytes = resources.allocator.getAllocatedMemory();
      long t1 = System.nanoTime();

      RankGroup group = RankGroup.meet(context, options, devices, ticket,
          own.layout().toBytes());
      resources.group = group;
      List<PartitionLayout> layouts = new ArrayList<>(rankSize);
      for (RankEntry entry : group.entries()) {
        layouts.add(PartitionLayout.fromBytes(entry.payload()));
      }
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
      long[] counts = new long[rankSize];
      long[] displs = new long[rankSize];
      long received = 0;
      for (int r = 0; r < rankSize; r++) {
        counts[r] = layouts.get(r).blockBytes();
        if (r != rank) {
          displs[r] = received;
          received += PartitionLayout.align8(counts[r]);
        }
      }
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
      // The batches handed out below are slices: no allocation after this point.
      metrics.addMemory(ownBytes, resources.allocator.getPeakMemoryAllocation());
      LOG.info("{}: gathered {} rows over {} (device {}), {} bytes received, {} sent; conversion"
          + " {} ms, rendezvous {} ms, collective {} ms", where, rows, transport, device, received,
          counts[rank] * (rankSize - 1),
          (t1 - t0) / 1_000_000, (t2 - t1) / 1_000_000, (t3 - t2) / 1_000_000);
      return resources.batches(rankSize);
    } catch (RuntimeException | Error e) {
      resources.abortCommunicator();
      throw e;
    }
  }

  /** Everything one task owns; closed once, in reverse order of creation. */
  private static final class TaskResources {
    final BufferAllocator allocator;
    PartitionBuffers own;
    RankGroup group;
    GatheredPartitions gathered;

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

    Iterator<ColumnarBatch> batches(int rankSize) {
      GatheredPartitions out = gathered;
      return new Iterator<>() {
        private int next = 0;

        @Override
        public boolean hasNext() {
          return next < rankSize;
        }

        @Override
        public ColumnarBatch next() {
          if (next >= rankSize) {
            throw new NoSuchElementException();
          }
          return out.batch(next++);
        }
      };
    }

    synchronized void close() {
      RuntimeException first = null;
      try {
        closeCommunicator();
      } catch (RuntimeException e) {
        first = e;
      }
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
      if (first != null) {
        LOG.warn("allGatherOnNpu: releasing task resources failed", first);
      }
    }
  }
}
