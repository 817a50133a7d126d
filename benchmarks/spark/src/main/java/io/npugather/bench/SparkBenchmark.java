package io.npugather.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.storage.StorageLevel;

/**
 * All-gather of a DataFrame, side by side: {@code allGatherOnNpu} (backend {@code host}), collect +
 * broadcast, a barrier stage's {@code allGather} of strings, shuffle replication and the floor (one
 * pass over the cached partition, plus the time to write the gathered bytes once at this machine's
 * memcpy rate, measured in the same run). See {@link BenchOptions#USAGE}.
 *
 * <p>Per master, rank count and ranks per executor JVM one Spark application; per shape and size
 * the input is cached and materialised first, its digest taken (the expected checksum), then every
 * method runs {@code warmup} times unmeasured and {@code runs} times measured, interleaved. Memory
 * peaks are sampled in every executor JVM ({@link MemoryProbe}) between a reset before and a read
 * after each run.
 */
public final class SparkBenchmark {
  static final String FLOOR_PLUS_MEMCPY = "floor + memcpy";
  static final String MEMCPY = "memcpy";

  private final BenchOptions options;
  private final List<Measurement> measurements = new ArrayList<>();
  private final List<String> notes = new ArrayList<>();

  SparkBenchmark(BenchOptions options) {
    this.options = options;
  }

  public static void main(String[] args) {
    BenchOptions options;
    try {
      if (args.length > 0 && (args[0].equals("--help") || args[0].equals("-h"))) {
        System.out.println(BenchOptions.USAGE);
        return;
      }
      options = BenchOptions.parse(args);
    } catch (IllegalArgumentException e) {
      System.err.println(e.getMessage());
      System.exit(2);
      return;
    }
    try {
      Report report = new SparkBenchmark(options).run(String.join(" ", args));
      System.exit(report.allVerified() ? 0 : 1);
    } catch (Exception e) {
      e.printStackTrace();
      System.exit(1);
    }
  }

  /**
   * Runs every configuration, prints the report and writes it to {@code --output} and {@code
   * --csv}.
   */
  Report run(String commandLine) throws Exception {
    String loadBefore = loadAverage();
    for (String master : options.masters()) {
      for (int ranks : options.ranks()) {
        for (int perExecutor : ranksPerExecutor(master, ranks)) {
          try (ClusterLauncher launcher = launch(master, ranks, perExecutor)) {
            for (Shape shape : options.shapes()) {
              for (long size : options.sizes()) {
                measure(launcher.spark(), master, ranks, perExecutor, shape, size);
              }
            }
          }
        }
      }
    }
    Report report = new Report(measurements, notes, commandLine, loadBefore, loadAverage());
    String markdown = report.markdown();
    System.out.println(markdown);
    if (options.output() != null) {
      Files.writeString(options.output(), markdown, StandardCharsets.UTF_8);
    }
    if (options.csv() != null) {
      Files.writeString(options.csv(), report.csv(), StandardCharsets.UTF_8);
    }
    return report;
  }

  /** The ranks per executor JVM to run {@code ranks} with: all of them in local mode. */
  private List<Integer> ranksPerExecutor(String master, int ranks) {
    return master.equals("local") ? List.of(ranks) : options.ranksPerExecutor();
  }

  private ClusterLauncher launch(String master, int ranks, int ranksPerExecutor)
      throws IOException {
    SparkConf conf =
        new SparkConf(false)
            .setAppName("npugather-bench")
            .set("spark.ui.enabled", "false")
            .set("spark.driver.host", "127.0.0.1")
            .set("spark.driver.bindAddress", "127.0.0.1")
            .set("spark.dynamicAllocation.enabled", "false")
            .set("spark.sql.shuffle.partitions", String.valueOf(ranks))
            .set("spark.sql.adaptive.enabled", "false")
            .set("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
            // Results, broadcasts and allGather messages of several hundred MiB.
            .set("spark.driver.maxResultSize", "0")
            .set("spark.rpc.message.maxSize", "2047")
            .set("spark.executorEnv.NPUGATHER_HOST_ADDRESS", "127.0.0.1");
    System.err.printf("== %s, %d ranks, %d per executor%n", master, ranks, ranksPerExecutor);
    return master.equals("local")
        ? ClusterLauncher.local(ranks, conf)
        : ClusterLauncher.executorJvms(
            ranks / ranksPerExecutor,
            ranksPerExecutor,
            options.executorMemoryMb(),
            options.executorJavaOptions(),
            conf);
  }

  private void measure(
      SparkSession spark, String master, int ranks, int ranksPerExecutor, Shape shape, long size)
      throws Exception {
    long rowsPerPartition = Math.max(1, size / shape.bytesPerRow());
    Dataset<Row> data =
        shape.generate(spark, ranks, rowsPerPartition).persist(StorageLevel.MEMORY_ONLY());
    try {
      data.count();
      BenchInput input = new BenchInput(spark, data, shape, ranks, rowsPerPartition);
      long expected = 0;
      for (long[] d : FloorMethod.scan(input)) {
        expected += d[2];
      }
      long partitionBytes = input.partitionBytes();
      System.err.printf(
          "-- %s: %d rows per partition, %.1f MiB%n",
          shape.describe(), rowsPerPartition, partitionBytes / 1048576.0);
      Map<String, GatherMethod> methods = new LinkedHashMap<>();
      Map<String, Measurement> results = new LinkedHashMap<>();
      for (String name : options.methods()) {
        GatherMethod method = GatherMethod.named(name);
        methods.put(name, method);
        results.put(
            name,
            new Measurement(
                master,
                ranks,
                ranksPerExecutor,
                shape,
                partitionBytes,
                name,
                method.expectedRows(input) * shape.bytesPerRow()));
      }
      Measurement memcpy =
          methods.containsKey("floor")
              ? new Measurement(
                  master,
                  ranks,
                  ranksPerExecutor,
                  shape,
                  partitionBytes,
                  MEMCPY,
                  ranks * partitionBytes)
              : null;
      List<String> order = new ArrayList<>(methods.keySet());
      for (int round = 0; round < options.warmup() + options.runs(); round++) {
        boolean measured = round >= options.warmup();
        for (int i = 0; i < order.size(); i++) {
          String name = order.get((i + round) % order.size());
          runOnce(input, methods.get(name), expected, measured ? results.get(name) : null);
        }
        if (memcpy != null) {
          long nanos = MemcpyMeasure.run(input).innerNanos();
          if (measured) {
            memcpy.nanos.add(nanos);
          }
        }
      }
      measurements.addAll(results.values());
      if (memcpy != null) {
        measurements.add(memcpy);
      }
      if (options.checkHashRepartition()) {
        notes.add(
            String.format(
                "%s, %d ranks, %s: %s",
                master,
                ranks,
                shape.label(),
                HashRepartitionCheck.describe(
                    input, HashRepartitionCheck.rowsPerPartition(input))));
      }
    } finally {
      data.unpersist(true);
    }
  }

  /** One run of {@code method}: timed, its memory sampled, its output verified. */
  private void runOnce(
      BenchInput input, GatherMethod method, long expectedChecksum, Measurement into)
      throws Exception {
    MemoryProbes.reset(input);
    long start = System.nanoTime();
    Outcome outcome = method.run(input);
    long nanos = System.nanoTime() - start;
    MemoryProbes.Peaks peaks = MemoryProbes.read(input);
    List<String> problems = verify(input, method, outcome, expectedChecksum);
    StringBuilder offHeap = new StringBuilder();
    peaks
        .perExecutor()
        .forEach((id, p) -> offHeap.append(String.format(" %s:%.1f", id, p[2] / 1048576.0)));
    System.err.printf(
        "   %-16s %9.1f ms, off-heap MiB per executor%s%s%s%n",
        method.name(),
        nanos / 1e6,
        offHeap,
        into == null ? " (warm-up)" : "",
        problems.isEmpty() ? "" : " WRONG: " + problems);
    if (into != null) {
      into.addRun(nanos, outcome);
      into.addMemory(peaks);
      into.problems.addAll(problems);
    } else if (!problems.isEmpty()) {
      throw new IllegalStateException(method.name() + " delivered wrong output: " + problems);
    }
  }

  /**
   * Every output partition (one per rank) holds the expected rows with the expected checksum: all
   * rows for a gather, the partition's own for the floor.
   */
  static List<String> verify(
      BenchInput input, GatherMethod method, Outcome outcome, long expectedChecksum) {
    List<String> problems = new ArrayList<>();
    List<long[]> digests = outcome.digests();
    if (digests.size() != input.ranks()) {
      problems.add(digests.size() + " output partitions, expected " + input.ranks());
    }
    long rowSum = 0;
    long checksumSum = 0;
    for (long[] d : digests) {
      rowSum += d[1];
      checksumSum += d[2];
      if (d[1] != method.expectedRows(input)) {
        problems.add(
            "partition " + d[0] + ": " + d[1] + " rows, expected " + method.expectedRows(input));
      } else if (method.expectedRows(input) != input.rowsPerPartition()
          && d[2] != expectedChecksum) {
        problems.add("partition " + d[0] + ": checksum differs");
      }
    }
    // The floor's partitions together hold every input row once.
    if (method.expectedRows(input) == input.rowsPerPartition()
        && input.ranks() > 1
        && (rowSum != input.ranks() * input.rowsPerPartition()
            || checksumSum != expectedChecksum)) {
      problems.add("the partitions' rows and checksums do not add up to the input's");
    }
    return problems;
  }

  private static String loadAverage() {
    try {
      return Files.readString(Path.of("/proc/loadavg")).trim();
    } catch (IOException e) {
      return "unknown";
    }
  }
}
