package io.npugather.spark.output;

import io.npugather.block.LocalBlock;
import io.npugather.spark.arrow.read.GatheredPartitions;
import java.util.ArrayList;
import java.util.List;
import org.apache.arrow.memory.BufferAllocator;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The gathered partitions of the ranks that share one executor, with everything they live in: the
 * local ranks' own partitions, the vectors over the receive buffer of the other executors' blocks,
 * and the local ranks' task allocators these came from. The executor holds every row once, however
 * many of its ranks gathered. Each local rank's {@link GatheredOutput} holds one reference; the
 * last one released closes it.
 */
public final class ExecutorOutput {
  private static final Logger LOG = LoggerFactory.getLogger(ExecutorOutput.class);

  private final List<BufferAllocator> allocators;
  private final List<LocalBlock> blocks;
  private final GatheredPartitions gathered;
  private final String transport;
  private final long bytes;
  private int references; // guarded by this

  /**
   * Takes ownership of {@code allocators}, {@code blocks} and {@code gathered}, with {@code
   * references} references to hand out ({@link #view}) or {@link #release}.
   */
  public ExecutorOutput(
      List<BufferAllocator> allocators,
      List<LocalBlock> blocks,
      GatheredPartitions gathered,
      String transport,
      int references) {
    this.allocators = new ArrayList<>(allocators);
    this.blocks = new ArrayList<>(blocks);
    this.gathered = gathered;
    this.transport = transport;
    this.references = references;
    long allocated = 0;
    for (BufferAllocator a : allocators) {
      allocated += a.getAllocatedMemory();
    }
    this.bytes = allocated;
  }

  /** Rank {@code rank}'s output over this one, taking one of the references. */
  public GatheredOutput view(int rank) {
    return new GatheredOutput(this, rank);
  }

  GatheredPartitions gathered() {
    return gathered;
  }

  /** Off-heap bytes it holds: the local ranks' partitions and the other executors' blocks. */
  public long bytes() {
    return bytes;
  }

  /** How the blocks of other executors came: the leaders' communicator's transport. */
  public String transport() {
    return transport;
  }

  /**
   * Releases one reference; the last closes the vectors, the partitions and then the allocators
   * (which fail on a leak), whatever each throws.
   */
  public void release() {
    synchronized (this) {
      if (references <= 0) {
        throw new IllegalStateException("the executor's gathered output is released already");
      }
      if (--references > 0) {
        return;
      }
    }
    RuntimeException first = null;
    List<AutoCloseable> all = new ArrayList<>();
    all.add(gathered);
    all.addAll(blocks);
    all.addAll(allocators);
    for (AutoCloseable c : all) {
      try {
        c.close();
      } catch (Exception e) {
        RuntimeException r = e instanceof RuntimeException re ? re : new RuntimeException(e);
        if (first == null) {
          first = r;
        } else {
          first.addSuppressed(r);
        }
      }
    }
    if (first != null) {
      LOG.warn("allGatherOnNpu: releasing an executor's gathered output failed", first);
    }
  }
}
