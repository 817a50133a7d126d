package io.npugather.spark.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.npugather.spark.memory.GatherMemory;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/** What a gather must leave behind when its jobs are done: no Arrow memory, no shared memory. */
public final class GatherLeaks {
  private GatherLeaks() {}

  /**
   * Waits up to 30 s until this JVM's gather Arrow memory is all released, then fails if any is
   * left: a gather's output is released just after the last job that read it ends, and tasks killed
   * by a failed stage release theirs when they end, shortly after the job.
   */
  public static void awaitArrowReleased() {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (GatherMemory.allocatedBytes() != 0 && System.nanoTime() < deadline) {
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        break;
      }
    }
    assertEquals(0, GatherMemory.allocatedBytes(), "Arrow bytes outstanding");
  }

  /** The project's /dev/shm objects whose names contain {@code marker}, sorted. */
  public static List<String> sharedMemoryObjects(String marker) {
    try (Stream<Path> files = Files.list(Path.of("/dev/shm"))) {
      return files
          .map(p -> p.getFileName().toString())
          .filter(n -> n.startsWith("npugather.") && n.contains(marker))
          .sorted()
          .toList();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
