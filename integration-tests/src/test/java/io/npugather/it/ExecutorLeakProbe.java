package io.npugather.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.npugather.Communicator;
import io.npugather.spark.memory.GatherMemory;
import io.npugather.spark.memory.LargeBufferCache;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;

/**
 * Reads, in every executor JVM, what a finished gather must have released: the Arrow memory still
 * allocated from {@link GatherMemory}'s root allocator (every task's child allocator hangs off it;
 * idle cached memory is not allocated) and the native communicators still alive; and what its cache
 * of large buffers holds, has reused and may keep. One barrier task per executor (each has one
 * core), so every executor answers.
 */
final class ExecutorLeakProbe extends AbstractFunction1<Iterator<Object>, Iterator<String>>
    implements Serializable {
  private static final long serialVersionUID = 1L;

  /**
   * One executor's figures.
   *
   * @param cacheReused buffers served from idle cached memory so far
   * @param cacheIdleBytes idle cached memory now
   * @param cacheLimit the most idle memory its conf lets it keep
   */
  record Figures(
      long pid,
      long arrowBytes,
      long liveCommunicators,
      long cacheReused,
      long cacheIdleBytes,
      long cacheLimit) {}

  /** The figures of {@code executors} executor JVMs, one each. */
  static List<Figures> run(SparkCluster cluster, int executors) {
    List<Figures> figures = new ArrayList<>();
    for (String line : cluster.inBarrierTasks(executors, new ExecutorLeakProbe(), String.class)) {
      String[] f = line.split(" ");
      figures.add(
          new Figures(
              Long.parseLong(f[0]),
              Long.parseLong(f[1]),
              Long.parseLong(f[2]),
              Long.parseLong(f[3]),
              Long.parseLong(f[4]),
              Long.parseLong(f[5])));
    }
    return figures;
  }

  /**
   * The figures once no executor holds Arrow memory or a communicator any more, or after 30 s: a
   * gather's output is released just after the last job that read it ends.
   */
  static List<Figures> awaitReleased(SparkCluster cluster, int executors) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (true) {
      List<Figures> figures = run(cluster, executors);
      boolean released =
          figures.stream().allMatch(f -> f.arrowBytes() == 0 && f.liveCommunicators() == 0);
      if (released || System.nanoTime() - deadline > 0) {
        return figures;
      }
      try {
        Thread.sleep(200);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return figures;
      }
    }
  }

  /** Every executor of the cluster holds no Arrow memory and no native communicator. */
  static void assertNothingHeld(SparkCluster cluster, int executors) {
    // One task per slot, so that every executor answers however many slots it has.
    List<Figures> figures = awaitReleased(cluster, cluster.taskSlots());
    assertEquals(
        executors,
        figures.stream().map(Figures::pid).distinct().count(),
        "one answer per executor: " + figures);
    for (Figures f : figures) {
      assertEquals(
          List.of(0L, 0L),
          List.of(f.arrowBytes(), f.liveCommunicators()),
          "executor " + f.pid() + " still holds Arrow memory or communicators: " + figures);
    }
  }

  @Override
  public Iterator<String> apply(Iterator<Object> ignored) {
    LargeBufferCache.Stats cache = GatherMemory.cache().stats();
    String line =
        ProcessHandle.current().pid()
            + " "
            + GatherMemory.allocatedBytes()
            + " "
            + Communicator.liveCount()
            + " "
            + cache.reused()
            + " "
            + cache.idleBytes()
            + " "
            + GatherMemory.cache().maxIdleBytes();
    return CollectionConverters.asScala(List.of(line).iterator());
  }
}
