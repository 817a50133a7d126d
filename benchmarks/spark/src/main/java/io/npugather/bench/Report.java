package io.npugather.bench;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;

/** The markdown report: one table row per method and configuration, ratios to npu. */
final class Report {
  private final List<Measurement> measurements;
  private final List<String> notes;
  private final String commandLine;
  private final String loadBefore;
  private final String loadAfter;

  Report(
      List<Measurement> measurements,
      List<String> notes,
      String commandLine,
      String loadBefore,
      String loadAfter) {
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
    md.append("Java ")
        .append(System.getProperty("java.version"))
        .append(", Spark ")
        .append(org.apache.spark.package$.MODULE$.SPARK_VERSION())
        .append(", ")
        .append(Runtime.getRuntime().availableProcessors())
        .append(" CPUs; /proc/loadavg before: ")
        .append(loadBefore)
        .append(", after: ")
        .append(loadAfter)
        .append("\n\n");
    md.append(
        "| master | ranks | ranks/executor | shape | MiB/partition | method | median ms |"
            + " min-max ms | GB/s | x npu | heap MiB/executor | heap after GC MiB/executor |"
            + " off-heap MiB/executor | off-heap / (table + partition) | driver heap MiB |"
            + " verified |\n");
    md.append(
        "| --- | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
            + " ---: | ---: | --- |\n");
    for (List<Measurement> group : groups().values()) {
      Measurement npu = find(group, "npu");
      for (Measurement m : group) {
        row(md, m, m.median(), millis(m.min()) + "-" + millis(m.max()), npu);
      }
      Measurement sum = floorPlusMemcpy(group);
      if (sum != null) {
        row(md, sum, sum.median(), "", npu);
      }
    }
    md.append(
        "\nGB/s: bytes each rank ends up holding (all partitions' payload; the floor: its"
            + " own) / median time. x npu: median time / npu's median time. memcpy: the slowest"
            + " rank's in-task time to copy its gathered bytes once (all ranks at once). Heap: peak"
            + " used heap above the level after a GC at the start of the run (garbage included);"
            + " heap after GC: the highest heap level a GC during the run left (0: no GC ran);"
            + " off-heap: Arrow allocators + JDK direct buffers; both sampled every "
            + MemoryProbe.PERIOD_MILLIS
            + " ms in every executor JVM, highest executor, highest run. In local mode the"
            + " executor is the driver JVM. off-heap / (table + partition), for the methods that"
            + " gather off-heap: off-heap per executor over the gathered table (ranks x"
            + " MiB/partition) plus one partition.\n");
    md.append(
        "\nRatios (median time / npu's median time; npu / (floor + memcpy) last):\n\n"
            + "| master | ranks | ranks/executor | shape | MiB/partition | broadcast |"
            + " barrier-strings | shuffle | npu / (floor + memcpy) |\n"
            + "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n");
    for (List<Measurement> group : groups().values()) {
      targets(md, group);
    }
    phases(md);
    for (String note : notes) {
      md.append("\n- ").append(note);
    }
    if (!notes.isEmpty()) {
      md.append('\n');
    }
    return md.toString();
  }

  /** The CSV columns, one row per measurement; times in ms, memory in MiB (see markdown()). */
  static final String CSV_HEADER =
      "master,ranks,ranks_per_executor,shape,partition_bytes,method,median_ms,min_ms,max_ms,gbps,"
          + "heap_mib,heap_after_gc_mib,offheap_mib,offheap_x_table_and_partition,"
          + "driver_heap_mib,verified";

  /** The methods that hold the gathered table off-heap: their off-heap is held to the table. */
  private static final List<String> OFF_HEAP_METHODS = List.of("npu", "npu-per-rank");

  /**
   * Every measurement as one CSV row, and {@code floor + memcpy} where both ran: what {@code
   * LineChart} draws (time or memory against size and ranks, one line per method).
   */
  String csv() {
    StringBuilder csv = new StringBuilder(CSV_HEADER).append('\n');
    for (List<Measurement> group : groups().values()) {
      for (Measurement m : group) {
        csvRow(csv, m, m.median(), m.min(), m.max(), !m.method.equals(SparkBenchmark.MEMCPY));
      }
      Measurement sum = floorPlusMemcpy(group);
      if (sum != null) {
        csvRow(csv, sum, sum.median(), sum.min(), sum.max(), false);
      }
    }
    return csv.toString();
  }

  /** The bar npu is held to: the floor's median plus memcpy's, as one run; null without both. */
  private static Measurement floorPlusMemcpy(List<Measurement> group) {
    Measurement floor = find(group, "floor");
    Measurement memcpy = find(group, SparkBenchmark.MEMCPY);
    if (floor == null || memcpy == null) {
      return null;
    }
    Measurement sum =
        new Measurement(
            floor.master,
            floor.ranks,
            floor.ranksPerExecutor,
            floor.shape,
            floor.partitionBytes,
            SparkBenchmark.FLOOR_PLUS_MEMCPY,
            memcpy.bytesPerRank);
    sum.nanos.add(floor.median() + memcpy.median());
    return sum;
  }

  private static void csvRow(
      StringBuilder csv, Measurement m, long median, long min, long max, boolean memory) {
    csv.append(
        String.format(
            Locale.ROOT,
            "%s,%d,%d,%s,%d,%s,%.3f,%.3f,%.3f,%.4f,%s,%s,%s,%s,%s,%s%n",
            m.master.equals("local") ? "local" : "cluster",
            m.ranks,
            m.ranksPerExecutor,
            m.shape.label(),
            m.partitionBytes,
            m.method,
            median / 1e6,
            min / 1e6,
            max / 1e6,
            m.bytesPerRank / (median / 1e9) / 1e9,
            memory ? mibCsv(m.heapPeak) : "",
            memory ? mibCsv(m.heapAfterGcPeak) : "",
            memory ? mibCsv(m.offHeapPeak) : "",
            OFF_HEAP_METHODS.contains(m.method)
                ? String.format(Locale.ROOT, "%.3f", offHeapToTable(m))
                : "",
            memory ? mibCsv(m.driverHeapPeak) : "",
            m.method.equals(SparkBenchmark.MEMCPY)
                    || m.method.equals(SparkBenchmark.FLOOR_PLUS_MEMCPY)
                ? "n/a"
                : m.verified() ? "yes" : "no"));
  }

  /**
   * Off-heap per executor over the gathered table plus one partition: at most 1.1 is the aim, a
   * copy of the table per rank is about ranks per executor.
   */
  static double offHeapToTable(Measurement m) {
    return (double) m.offHeapPeak / ((m.ranks + 1L) * m.partitionBytes);
  }

  private static String mibCsv(long bytes) {
    return String.format(Locale.ROOT, "%.2f", bytes / 1048576.0);
  }

  private static void row(
      StringBuilder md, Measurement m, long medianNanos, String range, Measurement npu) {
    boolean timed =
        !m.method.equals(SparkBenchmark.MEMCPY)
            && !m.method.equals(SparkBenchmark.FLOOR_PLUS_MEMCPY);
    boolean ratio = npu != null && !m.method.equals(SparkBenchmark.MEMCPY);
    md.append(configuration(m))
        .append(
            String.format(
                " %s | %s | %s | %.3f | %s | %s | %s | %s | %s | %s | %s |%n",
                m.method,
                millis(medianNanos),
                range,
                m.bytesPerRank / (medianNanos / 1e9) / 1e9,
                ratio ? String.format("%.2f", (double) medianNanos / npu.median()) : "",
                timed ? mib(m.heapPeak) : "",
                timed ? mib(m.heapAfterGcPeak) : "",
                timed ? mib(m.offHeapPeak) : "",
                OFF_HEAP_METHODS.contains(m.method) ? String.format("%.2f", offHeapToTable(m)) : "",
                timed ? mib(m.driverHeapPeak) : "",
                timed ? (m.verified() ? "yes" : "NO: " + String.join("; ", m.problems)) : "n/a"));
  }

  /** Per configuration: how many times npu's median each alternative takes, and the target. */
  private static void targets(StringBuilder md, List<Measurement> group) {
    Measurement npu = find(group, "npu");
    if (npu == null || group.size() < 2) {
      return;
    }
    Measurement first = group.get(0);
    md.append(configuration(first));
    for (String other : List.of("broadcast", "barrier-strings", "shuffle")) {
      Measurement m = find(group, other);
      md.append(m == null ? " |" : String.format(" %.2f |", (double) m.median() / npu.median()));
    }
    Measurement floor = find(group, "floor");
    Measurement memcpy = find(group, SparkBenchmark.MEMCPY);
    md.append(
        floor == null || memcpy == null
            ? " |\n"
            : String.format(
                " %.2f |%n", (double) npu.median() / (floor.median() + memcpy.median())));
  }

  /**
   * The gather's phases per rank (medians over the runs) against this run's copy rate: conversion
   * to Arrow against one memcpy of a partition, the collective against one memcpy of the bytes an
   * executor receives, and reading the gathered rows (the slowest output partition, inside its
   * task, the benchmark's checksum included) against one memcpy of the table and against reading
   * {@code ranks} cached partitions as the floor reads its one.
   */
  private void phases(StringBuilder md) {
    StringBuilder rows = new StringBuilder();
    for (List<Measurement> group : groups().values()) {
      Measurement memcpy = find(group, SparkBenchmark.MEMCPY);
      Measurement floor = find(group, "floor");
      for (Measurement m : group) {
        if (m.conversionNanos.isEmpty()) {
          continue;
        }
        long received = Measurement.median(m.receivedPerExecutor);
        long collective = Measurement.median(m.collectiveNanos);
        long read = Measurement.median(m.readNanos);
        rows.append(configuration(m))
            .append(
                String.format(
                    " %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |%n",
                    m.method,
                    millis(Measurement.median(m.conversionNanos)),
                    memcpy == null
                        ? ""
                        : ratio(
                            Measurement.median(m.conversionNanos),
                            memcpyOf(memcpy, m.partitionBytes)),
                    millis(Measurement.median(m.rendezvousNanos)),
                    millis(collective),
                    mib(received),
                    memcpy == null || received == 0
                        ? ""
                        : ratio(collective, memcpyOf(memcpy, received)),
                    millis(read),
                    memcpy == null ? "" : ratio(read, memcpy.median()),
                    floor == null
                        ? ""
                        : ratio(read, m.ranks * Measurement.median(floor.readNanos))));
      }
    }
    if (rows.length() == 0) {
      return;
    }
    md.append(
            "\nThe gather's phases, per rank (medians; conversion, rendezvous and collective from the"
                + " plan node's figures, read inside the reading tasks):\n\n"
                + "| master | ranks | ranks/executor | shape | MiB/partition | method | conversion ms |"
                + " conversion / memcpy of a partition | rendezvous ms | collective ms | received"
                + " MiB/executor | collective / memcpy of received | read ms | read / memcpy of the"
                + " table | read / (ranks x floor's read) |\n"
                + "| --- | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
                + " ---: | ---: | ---: |\n")
        .append(rows);
  }

  /** The time this run's memcpy takes for {@code bytes}, at the rate it measured. */
  private static long memcpyOf(Measurement memcpy, long bytes) {
    return (long) ((double) memcpy.median() * bytes / memcpy.bytesPerRank);
  }

  private static String ratio(long nanos, long of) {
    return of <= 0 ? "" : String.format("%.2f", (double) nanos / of);
  }

  /** A row's first cells: master, ranks, ranks per executor, shape and MiB per partition. */
  private static String configuration(Measurement m) {
    return String.format(
        "| %s | %d | %d | %s | %s |",
        setting(m), m.ranks, m.ranksPerExecutor, m.shape.label(), mib(m.partitionBytes));
  }

  /** local[N], or how many executor JVMs ran the ranks. */
  private static String setting(Measurement m) {
    if (m.master.equals("local")) {
      return "local[" + m.ranks + "]";
    }
    int executors = m.ranks / m.ranksPerExecutor;
    return executors + (executors == 1 ? " executor JVM" : " executor JVMs");
  }

  static String millis(long nanos) {
    double ms = nanos / 1e6;
    return ms >= 100
        ? String.format("%.0f", ms)
        : ms >= 10 ? String.format("%.1f", ms) : String.format("%.2f", ms);
  }

  private static String mib(long bytes) {
    double mib = bytes / 1048576.0;
    return String.format(mib >= 100 ? "%.0f" : mib >= 1 ? "%.1f" : "%.2f", mib);
  }

  private Map<String, List<Measurement>> groups() {
    Map<String, List<Measurement>> groups = new LinkedHashMap<>();
    for (Measurement m : measurements) {
      String key =
          m.master
              + "/"
              + m.ranks
              + "/"
              + m.ranksPerExecutor
              + "/"
              + m.shape
              + "/"
              + m.partitionBytes;
      groups.computeIfAbsent(key, k -> new ArrayList<>()).add(m);
    }
    return groups;
  }

  private static Measurement find(List<Measurement> group, String method) {
    return group.stream().filter(m -> Objects.equals(m.method, method)).findFirst().orElse(null);
  }
}
