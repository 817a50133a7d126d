package io.npugather.spark;

import io.npugather.Communicator;
import io.npugather.block.BlockLayout;
import io.npugather.block.LocalBlock;
import io.npugather.block.ReceiveDisplacements;
import io.npugather.spark.arrow.read.GatheredPartitions;
import io.npugather.spark.arrow.write.PartitionWriter;
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

  GatherTask(StructType schema, String timeZoneId, RankTask ranks) {
    this.schema = schema;
    this.timeZoneId = timeZoneId;
    this.ranks = ranks;
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

      Communicator communicator = me.connect();
      String transport = communicator.transport();
      int device = group.entries().get(rank).deviceId();

      // This rank's own block is served from its input vectors: the receive buffer holds
      // only the peers' blocks, 8-byte aligned.
      ReceiveDisplacements placement = ReceiveDisplacements.of(layouts, rank);
      long[] counts = placement.counts();
      long[] displs = placement.displacements();
      long received = placement.totalBytes();
      ArrowBuf recv = received == 0 ? null : me.allocator().buffer(received);
      try {
        communicator.allGatherVSegments(
            own.segmentAddresses(), own.segmentLengths(), recv, counts, displs);
        me.closeGroup();
        resources.gathered =
            GatheredPartitions.wrap(recv, layouts, displs, rank, own, schema, me.allocator());
      } finally {
        if (recv != null) {
          recv.close(); // the gathered partitions hold their own reference
        }
      }

      long rows = resources.gathered.totalRows();
      long sent = counts[rank] * (rankSize - 1);
      me.collectiveDone(sent, received, rows);
      ranks
          .metrics()
          .addRankData(own.layout().rowCount(), counts[rank], Arrays.stream(counts).sum());
      // The batches handed out below are slices: no allocation after this point.
      ranks.metrics().addMemory(ownBytes, me.allocator().getPeakMemoryAllocation());
      LOG.info(
          "{}: gathered {} rows over {}{}, {} bytes received, {} sent; {}",
          me.where(),
          rows,
          transport,
          device < 0 ? "" : " (device " + device + ")",
          received,
          sent,
          me.timings());
      return resources.handOver();
    } catch (RuntimeException | Error e) {
      me.abort();
      throw e;
    }
  }

  /**
   * What the task owns beyond its {@link RankTask.Rank}; released once, when the task completes: on
   * success the output has the allocator, and closes unless the executor keeps it.
   */
  private static final class TaskResources {
    final RankTask.Rank me;
    LocalBlock own;
    GatheredPartitions gathered;
    GatheredOutput output;

    TaskResources(RankTask.Rank me) {
      this.me = me;
    }

    /** The gathered partitions with the memory they live in, owned from now on by the output. */
    synchronized GatheredOutput handOver() {
      output = new GatheredOutput(me.handOverAllocator(), own, gathered, me.rank());
      return output;
    }

    synchronized void close() {
      Throwable first =
          output != null
              ? me.release(null, output::closeUnlessKept) // kept once the stage's writer took it
              : me.release(null, gathered, own);
      if (first != null) {
        LOG.warn("allGatherOnNpu: releasing task resources failed", first);
      }
    }
  }
}
