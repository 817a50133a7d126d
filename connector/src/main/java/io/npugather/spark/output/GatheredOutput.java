package io.npugather.spark.output;

import io.npugather.block.LocalBlock;
import io.npugather.spark.arrow.read.GatheredPartitions;
import java.util.Iterator;
import java.util.NoSuchElementException;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.spark.npugather.KnownSize;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One rank's gathered partitions, with everything they live in: the rank's own partition, the
 * vectors over the receive buffer, and the child allocator both came from. Made by a barrier task;
 * from then on owned by its executor's block manager ({@link GatheredOutputWriter}), which closes
 * it when the block is removed; read by any number of later tasks at once, each with its own batch
 * objects ({@link #batches()}).
 *
 * <p>Its off-heap bytes are accounted by its allocator (and {@code GatherMemory}); towards Spark's
 * on-heap storage memory it counts as the few objects it is.
 */
public final class GatheredOutput implements AutoCloseable, KnownSize {
  private static final Logger LOG = LoggerFactory.getLogger(GatheredOutput.class);

  /** On-heap bytes of this object and the vectors' Java objects, roughly. */
  private static final long ON_HEAP_BYTES = 16 * 1024;

  private final BufferAllocator allocator;
  private final LocalBlock own;
  private final GatheredPartitions gathered;
  private final int rank;
  private final long bytes;
  private volatile long mapTaskId = -1; // >= 0 once the block manager keeps it
  private boolean closed; // guarded by this

  /** Takes ownership of {@code allocator}, {@code own} and {@code gathered}. */
  public GatheredOutput(
      BufferAllocator allocator, LocalBlock own, GatheredPartitions gathered, int rank) {
    this.allocator = allocator;
    this.own = own;
    this.gathered = gathered;
    this.rank = rank;
    this.bytes = allocator.getAllocatedMemory();
  }

  /** The rank that gathered it. */
  public int rank() {
    return rank;
  }

  /** Number of ranks, so of batches. */
  public int rankSize() {
    return gathered.numRanks();
  }

  /** Rows over all ranks. */
  public long totalRows() {
    return gathered.totalRows();
  }

  /** Off-heap bytes it holds: the own partition and the peers' blocks. */
  public long bytes() {
    return bytes;
  }

  /** The task attempt whose map output this is, once kept; -1 before. */
  long mapTaskId() {
    return mapTaskId;
  }

  /**
   * Marks it as kept by the block manager for map output {@code mapTaskId}: from then on the block
   * manager closes it, not its task.
   */
  void kept(long mapTaskId) {
    this.mapTaskId = mapTaskId;
  }

  /** Closes it unless the block manager keeps it: the task's end on every path. */
  public void closeUnlessKept() {
    if (mapTaskId < 0) {
      close();
    }
  }

  /**
   * The batches of every source rank, in rank order: new batch objects over the same vectors. Valid
   * while the caller holds the block's read lock (or owns this object).
   */
  public Iterator<ColumnarBatch> batches() {
    int n = gathered.numRanks();
    return new Iterator<>() {
      private int next = 0;

      @Override
      public boolean hasNext() {
        return next < n;
      }

      @Override
      public ColumnarBatch next() {
        if (next >= n) {
          throw new NoSuchElementException();
        }
        return gathered.batch(next++);
      }
    };
  }

  @Override
  public long estimatedSize() {
    return ON_HEAP_BYTES;
  }

  /** Releases the vectors and closes the allocator (which fails on a leak). Idempotent. */
  @Override
  public synchronized void close() {
    if (closed) {
      return;
    }
    closed = true;
    RuntimeException first = null;
    try {
      gathered.close();
    } catch (RuntimeException e) {
      first = e;
    }
    try {
      own.close();
    } catch (RuntimeException e) {
      first = first == null ? e : first;
    }
    try {
      allocator.close();
    } catch (RuntimeException e) {
      first = first == null ? e : first;
    }
    if (first != null) {
      LOG.warn("allGatherOnNpu: releasing the gathered output of rank {} failed", rank, first);
    }
  }

  @Override
  public String toString() {
    return "GatheredOutput{rank="
        + rank
        + ", ranks="
        + gathered.numRanks()
        + ", rows="
        + gathered.totalRows()
        + ", bytes="
        + bytes
        + ", mapTask="
        + mapTaskId
        + "}";
  }
}
