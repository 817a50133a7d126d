package io.npugather.spark.output;

import io.npugather.spark.arrow.read.GatheredPartitions;
import java.util.Iterator;
import java.util.NoSuchElementException;
import org.apache.spark.npugather.KnownSize;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * One rank's gathered partitions: a reference to its executor's {@link ExecutorOutput}, which the
 * ranks of that executor share. Made by a barrier task; from then on owned by its executor's block
 * manager ({@link GatheredOutputWriter}), which closes it when the block is removed; read by any
 * number of later tasks at once, each with its own batch objects ({@link #batches()}).
 *
 * <p>Its off-heap bytes are accounted by the executor output's allocators (and {@code
 * GatherMemory}); towards Spark's on-heap storage memory it counts as the few objects it is.
 */
public final class GatheredOutput implements AutoCloseable, KnownSize {
  /** On-heap bytes of this object and the vectors' Java objects, roughly. */
  private static final long ON_HEAP_BYTES = 16 * 1024;

  private final ExecutorOutput shared;
  private final GatheredPartitions gathered;
  private final int rank;
  private volatile long mapTaskId = -1; // >= 0 once the block manager keeps it
  private boolean closed; // guarded by this

  /** Takes one of {@code shared}'s references ({@link ExecutorOutput#view}). */
  GatheredOutput(ExecutorOutput shared, int rank) {
    this.shared = shared;
    this.gathered = shared.gathered();
    this.rank = rank;
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

  /**
   * Off-heap bytes of the executor's output it reads: the executor's ranks' partitions and the
   * other executors' blocks (the same figure for every rank of the executor).
   */
  public long bytes() {
    return shared.bytes();
  }

  /** The executor's output it is a reference to. */
  public ExecutorOutput shared() {
    return shared;
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

  /** Releases its reference to the executor's output. Idempotent. */
  @Override
  public synchronized void close() {
    if (closed) {
      return;
    }
    closed = true;
    shared.release();
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
        + shared.bytes()
        + ", mapTask="
        + mapTaskId
        + "}";
  }
}
