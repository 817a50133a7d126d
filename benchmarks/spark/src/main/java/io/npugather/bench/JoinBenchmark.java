package io.npugather.bench;

import io.npugather.spark.NpuGather;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BiFunction;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.SparkConf;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerExecutorMetricsUpdate;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.functions;

/**
 * The same equi-join with the build side all-gathered onto the executors (the {@code ALLGATHER}
 * hint), broadcast by Spark through the driver ({@code BROADCAST}) and sort-merge joined ({@code
 * MERGE}), side by side in one session, every answer checked against the others (count and an
 * order-free sum of row hashes).
 *
 * <pre>
 * bin/npugather-bench --joins [master=local[2]] [buildMiB=16,64,256] [streamRows=2000000] [runs=3]
 *     [maxResultSize=0] [buildPartitions=slots] [key=long]
 * </pre>
 *
 * {@code master}: {@code local[N]} (one JVM) or {@code local-cluster[N,1,MB]} (N executor JVMs of
 * MB each, one core each). {@code maxResultSize}: Spark's {@code spark.driver.maxResultSize} (0, no
 * limit); a method that fails (Spark's broadcast above that limit or the driver's memory) is
 * reported as failing, with the first line of its error. {@code buildPartitions}: the cached build
 * side's partitions; with one per task slot (the default) the gather reads them where they lie,
 * with another number they move to the ranks through a shuffle first. {@code key}: {@code long}
 * (the row's number) or {@code string} (the same number after {@code "key-"}), so that Spark builds
 * its relation on one long or on key bytes.
 *
 * <p>Each method runs once to warm up, then the methods run in turn, {@code runs} rounds of all of
 * them, so that none meets executors the others warmed up more than it did.
 *
 * <p>Prints a markdown table: per build size and method the median and range of the join's wall
 * time, the ratio to the ALLGATHER median, the driver's peak heap above its level before the run
 * (sampled every 20 ms) and, across executor JVMs, the executors' peak resident memory (Spark's
 * process-tree metrics, the largest executor; in local mode the driver is the executor).
 */
public final class JoinBenchmark {
  private JoinBenchmark() {}

  private record Method(String name, BiFunction<Dataset<Row>, Dataset<Row>, Dataset<Row>> join) {}

  private static final Pattern LOCAL_CLUSTER = Pattern.compile("local-cluster\\[(\\d+),1,(\\d+)]");

  public static void main(String[] args) throws Exception {
    System.out.print(run(args));
  }

  /** Runs the benchmark; returns the markdown table (every answer checked, or it throws). */
  static String run(String[] args) throws Exception {
    String master = args.length > 0 ? args[0] : "local[2]";
    List<Long> buildMiB = new ArrayList<>();
    for (String s : (args.length > 1 ? args[1] : "16,64,256").split(",")) {
      buildMiB.add(Long.parseLong(s.trim()));
    }
    long streamRows = args.length > 2 ? Long.parseLong(args[2]) : 2_000_000L;
    int runs = args.length > 3 ? Integer.parseInt(args[3]) : 3;
    String maxResultSize = args.length > 4 ? args[4] : "0";
    int buildPartitions = args.length > 5 ? Integer.parseInt(args[5]) : 0;
    String key = args.length > 6 ? args[6] : "long";
    if (!key.equals("long") && !key.equals("string")) {
      throw new IllegalArgumentException("key = '" + key + "'; allowed: long or string");
    }

    SparkConf conf =
        new SparkConf()
            .setAppName("JoinBenchmark")
            .set("spark.ui.enabled", "false")
            .set("spark.ui.showConsoleProgress", "false")
            .set("spark.sql.autoBroadcastJoinThreshold", "-1")
            .set("spark.driver.maxResultSize", maxResultSize)
            .set("spark.executor.heartbeatInterval", "500ms");
    Matcher cluster = LOCAL_CLUSTER.matcher(master.replace(" ", ""));
    if (cluster.matches()) {
      // Executor RSS peaks, reported for executor JVMs only: each poll walks /proc, whose cost
      // grows with the machine's processes, so it polls no more often than peaks need.
      conf.set("spark.executor.processTreeMetrics.enabled", "true")
          .set("spark.executor.metrics.pollingInterval", "200ms");
    }
    ClusterLauncher launcher =
        cluster.matches()
            ? ClusterLauncher.executorJvms(
                Integer.parseInt(cluster.group(1)), Integer.parseInt(cluster.group(2)), "", conf)
            : ClusterLauncher.local(localSlots(master), conf);
    try (launcher) {
      return run(
          launcher.spark(),
          master,
          buildMiB,
          streamRows,
          runs,
          maxResultSize,
          buildPartitions,
          key);
    }
  }

  private static int localSlots(String master) {
    Matcher m = Pattern.compile("local\\[(\\d+)]").matcher(master);
    if (!m.matches()) {
      throw new IllegalArgumentException(
          "master = '" + master + "'; allowed: local[N] or local-cluster[N,1,MB]");
    }
    return Integer.parseInt(m.group(1));
  }

  private static String run(
      SparkSession spark,
      String master,
      List<Long> buildMiB,
      long streamRows,
      int runs,
      String maxResultSize,
      int buildPartitions,
      String key)
      throws Exception {
    spark.sparkContext().setLogLevel("WARN");
    int slots = spark.sparkContext().defaultParallelism();
    int partitions = buildPartitions > 0 ? buildPartitions : slots;
    boolean executorJvms = !spark.sparkContext().isLocal();
    ExecutorPeaks executorPeaks = new ExecutorPeaks();
    spark.sparkContext().addSparkListener(executorPeaks);
    List<Method> methods =
        List.of(
            new Method(
                "allgather",
                (s, b) ->
                    s.join(NpuGather.broadcastOnExecutors(b), s.col("k").equalTo(b.col("rk")))),
            new Method(
                "broadcast",
                (s, b) -> s.join(functions.broadcast(b), s.col("k").equalTo(b.col("rk")))),
            new Method(
                "sort-merge", (s, b) -> s.join(b.hint("merge"), s.col("k").equalTo(b.col("rk")))));
    StringBuilder md = new StringBuilder();
    md.append(
        String.format(
            Locale.ROOT,
            "%nJoin benchmark: %s (%d slots), build side in %d partitions, %s key, stream %d rows,"
                + " %d runs"
                + " after a warm-up, driver heap max %d MiB, spark.driver.maxResultSize=%s%n%n"
                + "| build MiB | build rows | method | median ms | min-max ms | x allgather |"
                + " driver heap peak MiB | executor RSS peak MiB |%n"
                + "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |%n",
            master,
            slots,
            partitions,
            key,
            streamRows,
            runs,
            Runtime.getRuntime().maxMemory() >> 20,
            maxResultSize));
    for (long mib : buildMiB) {
      // 64 bytes of payload per build row: a key, a long and a 48-byte string (a string key
      // adds its bytes beyond the long's 8).
      long buildRows = mib * (1L << 20) / 64;
      String asKey = key.equals("long") ? "%s" : "CONCAT('key-', CAST(%s AS STRING))";
      Dataset<Row> build =
          spark
              .range(0, buildRows, 1, partitions)
              .selectExpr(
                  String.format(asKey, "id") + " AS rk",
                  "id * 3 AS w",
                  "repeat(substr(md5(CAST(id AS STRING)), 1, 16), 3) AS s")
              .cache();
      build.count();
      Dataset<Row> stream =
          spark
              .range(0, streamRows, 1, slots)
              .selectExpr(
                  String.format(asKey, "(id * 7919) % " + (buildRows * 2)) + " AS k", "id AS v")
              .cache();
      stream.count();
      // A warm-up of every method, then the runs in rounds of every method, so that no method
      // meets executors the others warmed up (JIT, class loading) more than it did.
      Map<Method, Trial> trials = new LinkedHashMap<>();
      for (Method m : methods) {
        Trial trial = new Trial(runs);
        trials.put(m, trial);
        trial.attempt(() -> digest(m.join().apply(stream, build)));
      }
      for (int r = 0; r < runs; r++) {
        for (Method m : methods) {
          Trial trial = trials.get(m);
          trial.attempt(
              () -> {
                System.gc();
                HeapSampler sampler = new HeapSampler();
                sampler.start();
                executorPeaks.reset();
                long start = System.nanoTime();
                List<Object> answer;
                long nanos;
                long heapPeak;
                try {
                  answer = digest(m.join().apply(stream, build));
                  nanos = System.nanoTime() - start;
                } finally {
                  heapPeak = sampler.stopAndPeak();
                }
                trial.ran(nanos, heapPeak, executorJvms ? executorPeaks.awaitPeak() : 0);
                return answer;
              });
        }
      }
      List<Object> reference = null;
      double allgatherMedian = 0;
      for (Method m : methods) {
        Trial trial = trials.get(m);
        String row;
        if (trial.failure != null) {
          row =
              String.format(
                  Locale.ROOT,
                  "| %d | %d | %s | fails: %s | | | | |%n",
                  mib,
                  buildRows,
                  m.name(),
                  firstLine(trial.failure));
        } else {
          if (reference == null) {
            reference = trial.answer;
          } else if (!reference.equals(trial.answer)) {
            throw new IllegalStateException(
                m.name() + " answered " + trial.answer + ", allgather " + reference);
          }
          long[] sorted = trial.times.clone();
          java.util.Arrays.sort(sorted);
          double median = sorted[runs / 2] / 1e6;
          if (m.name().equals("allgather")) {
            allgatherMedian = median;
          }
          row =
              String.format(
                  Locale.ROOT,
                  "| %d | %d | %s | %.0f | %.0f-%.0f | %.2f | %d | %s |%n",
                  mib,
                  buildRows,
                  m.name(),
                  median,
                  sorted[0] / 1e6,
                  sorted[runs - 1] / 1e6,
                  median / allgatherMedian,
                  trial.heapPeak >> 20,
                  executorJvms ? String.valueOf(trial.executorPeak >> 20) : "(driver)");
        }
        System.out.print(row);
        md.append(row);
      }
      build.unpersist(true);
      stream.unpersist(true);
    }
    return md.toString();
  }

  /** The root cause's first line, shortened, without the table's column separator. */
  private static String firstLine(Throwable e) {
    Throwable root = e;
    while (root.getCause() != null && root.getCause() != root) {
      root = root.getCause();
    }
    String text = String.valueOf(root.getMessage()).strip();
    int newline = text.indexOf('\n');
    text = newline < 0 ? text : text.substring(0, newline);
    text = text.replace("|", "/");
    return root.getClass().getSimpleName()
        + ": "
        + (text.length() > 160 ? text.substring(0, 160) + " ..." : text);
  }

  /**
   * The executors' peak resident memory (Spark's process-tree metric {@code
   * ProcessTreeJVMRSSMemory}, polled by each executor and sent with its heartbeats), the largest
   * executor's, since the last {@link #reset}.
   */
  private static final class ExecutorPeaks extends SparkListener {
    private final Map<String, Long> peaks = new ConcurrentHashMap<>();

    void reset() {
      peaks.clear();
    }

    /** After the next heartbeats (every 500 ms), the largest executor's peak. */
    long awaitPeak() throws InterruptedException {
      Thread.sleep(1500);
      return peaks.values().stream().mapToLong(Long::longValue).max().orElse(0);
    }

    @Override
    public void onExecutorMetricsUpdate(SparkListenerExecutorMetricsUpdate update) {
      update
          .executorUpdates()
          .values()
          .foreach(
              metrics -> {
                long rss = metrics.getMetricValue("ProcessTreeJVMRSSMemory");
                peaks.merge(update.execId(), rss, Math::max);
                return null;
              });
    }
  }

  /** Count and an order-free sum of row hashes: equal for equal multisets of rows. */
  private static List<Object> digest(Dataset<Row> df) {
    Row r = df.selectExpr("count(*)", "sum(CAST(hash(*) AS BIGINT))").first();
    return List.of(r.get(0), r.get(1) == null ? 0L : r.get(1));
  }

  /** One method's runs at one build size: their times, memory peaks and answer, or its failure. */
  private static final class Trial {
    final long[] times;
    int done;
    long heapPeak;
    long executorPeak;
    List<Object> answer;
    Throwable failure; // the method fails (the broadcast above the driver's limits): no more runs

    Trial(int runs) {
      times = new long[runs];
    }

    /** Runs {@code run} unless the method failed before; keeps its answer or its failure. */
    void attempt(java.util.concurrent.Callable<List<Object>> run) throws Exception {
      if (failure != null) {
        return;
      }
      try {
        answer = run.call();
      } catch (Exception | OutOfMemoryError e) {
        failure = e;
      }
    }

    void ran(long nanos, long heap, long executor) {
      times[done++] = nanos;
      heapPeak = Math.max(heapPeak, heap);
      executorPeak = Math.max(executorPeak, executor);
    }
  }

  /** The driver's peak used heap above its level at start, sampled every 20 ms. */
  private static final class HeapSampler extends Thread {
    private final long base = usedHeap();
    private volatile boolean running = true;
    private long peak;

    HeapSampler() {
      setDaemon(true);
    }

    @Override
    public void run() {
      while (running) {
        peak = Math.max(peak, usedHeap() - base);
        try {
          Thread.sleep(20);
        } catch (InterruptedException e) {
          return;
        }
      }
    }

    long stopAndPeak() throws InterruptedException {
      running = false;
      join();
      return Math.max(0, peak);
    }

    private static long usedHeap() {
      long used = 0;
      for (MemoryPoolMXBean pool : ManagementFactory.getMemoryPoolMXBeans()) {
        if (pool.getType() == MemoryType.HEAP) {
          used += pool.getUsage().getUsed();
        }
      }
      return used;
    }
  }
}
