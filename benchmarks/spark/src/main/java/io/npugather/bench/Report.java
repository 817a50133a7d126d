package io.npugather.bench;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/** The markdown report: one table row per method and configuration, ratios to npu. */
final class Report {
  private final List<Measurement> measurements;
  private final List<String> notes;
  private final String commandLine;
  private final String loadBefore;
  private final String loadAfter;

  Report(List<Measurement> measurements, List<String> notes, String commandLine,
      String loadBefore, String loadAfter) {
    this.measurements = List.copyOf(measurements);
    this.notes = List.copyOf(notes);
    this.commandLine = commandLine;
    this.loadBefore = loadBefore;
    this.loadAfter = loadAfter;
  }

  boolean allVerified() {
    return measurements.stream().allMatch(Measurement::verified);
  }

  List<Measurement> measurements() {
    return measurements;
  }

  String markdown() {
    StringBuilder md = new StringBuilder();
    md.append("Command: `bin/npugather-bench ").append(commandLine).append("`  \n");
    md.append("Java ").append(System.getProperty("java.version")).append(", Spark ")
        .append(org.apache.spark.package$.MODULE$.SPARK_VERSION()).append(", ")
        .append(Runtime.getRuntime().availableProcessors()).append(" CPUs; /proc/loadavg before: ")
        .append(loadBefore).append(", after: ").append(loadAfter).append("\n\n");
    md.append("| master | ranks | shape | MiB/partition | method | median ms | min-max ms |"
        + " GB/s | x npu | heap MiB/executor | off-heap MiB/executor | driver heap MiB |"
        + " verified |\n");
    md.append("| --- | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        + " --- |\n");
    for (List<Measurement> group : groups().values()) {
      Measurement npu = find(group, "npu");
      for (Measurement m : group) {
        row(md, m, m.median(), String.format("%.1f-%.1f", m.min() / 1e6, m.max() / 1e6), npu);
      }
      Measurement floor = find(group, "floor");
      Measurement memcpy = find(group, SparkBenchmark.MEMCPY);
      if (floor != null && memcpy != null) {
        Measurement sum = new Measurement(floor.master, floor.ranks, floor.shape,
            floor.partitionBytes, SparkBenchmark.FLOOR_PLUS_MEMCPY, memcpy.bytesPerRank);
        row(md, sum, floor.median() + memcpy.median(), "", npu);
      }
    }
    md.append("\nGB/s: bytes each rank ends up holding (all partitions' payload; the floor: its"
        + " own) / median time. x npu: median time / npu's median time. memcpy: the slowest"
        + " rank's in-task time to copy its gathered bytes once (all ranks at once). Heap: peak"
        + " used heap above the level after a GC at the start of the run (garbage included);"
        + " off-heap: Arrow allocators + JDK direct buffers; both sampled every "
        + MemoryProbe.PERIOD_MILLIS + " ms, highest executor, highest run. In local mode the"
        + " executor is the driver JVM.\n");
    for (String note : notes) {
      md.append("\n- ").append(note);
    }
    if (!notes.isEmpty()) {
      md.append('\n');
    }
    return md.toString();
  }

  private static void row(StringBuilder md, Measurement m, long medianNanos, String range,
      Measurement npu) {
    boolean timed = !m.method.equals(SparkBenchmark.MEMCPY)
        && !m.method.equals(SparkBenchmark.FLOOR_PLUS_MEMCPY);
    md.append(String.format("| %s | %d | %s | %.1f | %s | %.1f | %s | %.2f | %s | %s | %s | %s |"
            + " %s |%n",
        m.master.equals("local") ? "local[" + m.ranks + "]" : "cluster (JVMs)", m.ranks,
        m.shape.label(), m.partitionBytes / 1048576.0, m.method, medianNanos / 1e6, range,
        m.bytesPerRank / (medianNanos / 1e9) / 1e9,
        npu == null ? "" : String.format("%.2f", (double) medianNanos / npu.median()),
        timed ? mib(m.heapPeak) : "", timed ? mib(m.offHeapPeak) : "",
        timed ? mib(m.driverHeapPeak) : "",
        timed ? (m.verified() ? "yes" : "NO: " + String.join("; ", m.problems)) : "n/a"));
  }

  private static String mib(long bytes) {
    return String.format("%.0f", bytes / 1048576.0);
  }

  private Map<String, List<Measurement>> groups() {
    Map<String, List<Measurement>> groups = new LinkedHashMap<>();
    for (Measurement m : measurements) {
      String key = m.master + "/" + m.ranks + "/" + m.shape + "/" + m.partitionBytes;
      groups.computeIfAbsent(key, k -> new ArrayList<>()).add(m);
    }
    return groups;
  }

  private static Measurement find(List<Measurement> group, String method) {
    return group.stream().filter(m -> Objects.equals(m.method, method)).findFirst().orElse(null);
  }
}
