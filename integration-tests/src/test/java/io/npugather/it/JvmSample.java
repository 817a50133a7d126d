package io.npugather.it;

import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import javax.management.ObjectName;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;

/**
 * What one JVM holds after a full collection: its heap, threads and file descriptors, and its live
 * objects by class (the class histogram of {@code jcmd <pid> GC.class_histogram}, taken in the JVM
 * itself, which collects first). Sampled in the driver ({@link #ofThisJvm}) and in every executor
 * ({@link #ofExecutors}) to tell what a long session accumulates, and whose classes it is.
 *
 * @param heapAfterGc heap bytes in use just after a full collection (the least of three)
 * @param rss the process's resident memory, bytes
 * @param connectorThreads threads the connector started ({@value #CONNECTOR_THREADS}*)
 * @param instances live instances by class name
 * @param bytes live bytes by class name
 */
record JvmSample(
    long pid,
    long heapAfterGc,
    long rss,
    int threads,
    int connectorThreads,
    long fds,
    Map<String, Long> instances,
    Map<String, Long> bytes)
    implements Serializable {

  /** The connector's classes; this module's own (the probes) are left out. */
  static final String CONNECTOR_PACKAGE = "io.npugather.";

  private static final String TEST_PACKAGE = "io.npugather.it.";
  private static final String CONNECTOR_THREADS = "npugather-";

  /** Collections per sample after the first. */
  private static final int COLLECTIONS = 3;

  /** A line of the histogram: rank, instances, bytes, class name. */
  private static final Pattern HISTOGRAM_LINE =
      Pattern.compile("^\\s*\\d+:\\s+(\\d+)\\s+(\\d+)\\s+(\\S+)", Pattern.MULTILINE);

  /**
   * This JVM's figures. Objects that only a {@link java.lang.ref.Cleaner} still has to release
   * after a first collection (the connector's registrations of unreachable RDDs) are gone by the
   * next ones; of {@value #COLLECTIONS} more, the one that leaves the least heap counts, so that
   * what Spark's threads hold for a moment (buffers of messages in flight, megabytes of them in the
   * driver) does not.
   */
  static JvmSample ofThisJvm() {
    histogram();
    String histogram = null;
    long heap = Long.MAX_VALUE;
    for (int i = 0; i < COLLECTIONS; i++) {
      pause(); // the cleaners run on their own threads
      String taken = histogram();
      long used = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
      if (used < heap) {
        heap = used;
        histogram = taken;
      }
    }
    Map<String, Long> instances = new HashMap<>();
    Map<String, Long> bytes = new HashMap<>();
    Matcher m = HISTOGRAM_LINE.matcher(histogram);
    while (m.find()) {
      instances.merge(m.group(3), Long.parseLong(m.group(1)), Long::sum);
      bytes.merge(m.group(3), Long.parseLong(m.group(2)), Long::sum);
    }
    int connectorThreads = 0;
    for (Thread t : Thread.getAllStackTraces().keySet()) {
      if (t.getName().startsWith(CONNECTOR_THREADS)) {
        connectorThreads++;
      }
    }
    long fds;
    try (Stream<Path> open = Files.list(Path.of("/proc/self/fd"))) {
      fds = open.count();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return new JvmSample(
        ProcessHandle.current().pid(),
        heap,
        residentBytes(),
        ManagementFactory.getThreadMXBean().getThreadCount(),
        connectorThreads,
        fds,
        instances,
        bytes);
  }

  /** The figures of every executor JVM, one barrier task on each (each has one task slot). */
  static List<JvmSample> ofExecutors(SparkCluster cluster) {
    List<JvmSample> samples =
        new ArrayList<>(cluster.inBarrierTasks(cluster.taskSlots(), new Probe(), JvmSample.class));
    samples.sort(Comparator.comparingLong(JvmSample::pid));
    return samples;
  }

  /** Live instances of the connector's classes, by class. */
  Map<String, Long> connectorInstances() {
    Map<String, Long> own = new HashMap<>();
    instances.forEach(
        (name, count) -> {
          if (name.startsWith(CONNECTOR_PACKAGE) && !name.startsWith(TEST_PACKAGE)) {
            own.put(name, count);
          }
        });
    return own;
  }

  /** Live bytes of all objects (the histogram's total). */
  long liveBytes() {
    return bytes.values().stream().mapToLong(Long::longValue).sum();
  }

  /**
   * The classes whose live bytes grew most from {@code before} to this sample, largest first:
   * "+1234567 B +890 objects java.lang.String".
   */
  List<String> topGrowth(JvmSample before, int limit) {
    return bytes.keySet().stream()
        .sorted(
            Comparator.comparingLong((String c) -> bytes.get(c) - before.bytes.getOrDefault(c, 0L))
                .reversed())
        .limit(limit)
        .map(
            c ->
                String.format(
                    "%+d B %+d objects %s",
                    bytes.get(c) - before.bytes.getOrDefault(c, 0L),
                    instances.get(c) - before.instances.getOrDefault(c, 0L),
                    c))
        .toList();
  }

  /** "pid 123: heap after GC 41.2 MB (RSS 300.1 MB), 87 threads (3 npugather-*), 240 fds". */
  String summary() {
    return String.format(
        "pid %d: heap after GC %.1f MB (RSS %.1f MB), %d threads (%d %s*), %d fds",
        pid, heapAfterGc / 1e6, rss / 1e6, threads, connectorThreads, CONNECTOR_THREADS, fds);
  }

  private static void pause() {
    try {
      Thread.sleep(200);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static long residentBytes() {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
        if (line.startsWith("VmRSS:")) { // "VmRSS:    123456 kB"
          return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
        }
      }
      return -1;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static String histogram() {
    try {
      return (String)
          ManagementFactory.getPlatformMBeanServer()
              .invoke(
                  new ObjectName("com.sun.management:type=DiagnosticCommand"),
                  "gcClassHistogram",
                  new Object[] {null},
                  new String[] {String[].class.getName()});
    } catch (Exception e) {
      throw new IllegalStateException("cannot take a class histogram", e);
    }
  }

  /** The executor side of {@link #ofExecutors}. */
  private static final class Probe extends AbstractFunction1<Iterator<Object>, Iterator<JvmSample>>
      implements Serializable {
    private static final long serialVersionUID = 1L;

    @Override
    public Iterator<JvmSample> apply(Iterator<Object> ignored) {
      return CollectionConverters.asScala(List.of(ofThisJvm()).iterator());
    }
  }
}
