package io.npugather.bench;

import io.npugather.spark.NpuGather;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.BiFunction;
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
 * </pre>
 *
 * Prints a markdown table: per build size and method the median and range of the join's wall time,
 * the ratio to the ALLGATHER median, and the driver's peak heap above its level before the run
 * (sampled every 20 ms; in local mode the driver is also the executor).
 */
public final class JoinBenchmark {
  private JoinBenchmark() {}

  private record Method(String name, BiFunction<Dataset<Row>, Dataset<Row>, Dataset<Row>> join) {}

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

    SparkSession spark =
        SparkSession.builder()
            .master(master)
            .appName("JoinBenchmark")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.autoBroadcastJoinThreshold", "-1")
            .config("spark.driver.maxResultSize", "0")
            .getOrCreate();
    spark.sparkContext().setLogLevel("WARN");
    int slots = spark.sparkContext().defaultParallelism();
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
            "%nJoin benchmark: %s (%d slots), stream %d rows, %d runs after a warm-up%n%n"
                + "| build MiB | build rows | method | median ms | min-max ms | x allgather |"
                + " driver heap peak MiB |%n| ---: | ---: | --- | ---: | ---: | ---: | ---: |%n",
            master,
            slots,
            streamRows,
            runs));
    for (long mib : buildMiB) {
      // 64 bytes of payload per build row: a key, a long and a 48-byte string.
      long buildRows = mib * (1L << 20) / 64;
      Dataset<Row> build =
          spark
              .range(0, buildRows, 1, slots)
              .selectExpr(
                  "id AS rk",
                  "id * 3 AS w",
                  "repeat(substr(md5(CAST(id AS STRING)), 1, 16), 3) AS s")
              .cache();
      build.count();
      Dataset<Row> stream =
          spark
              .range(0, streamRows, 1, slots)
              .selectExpr("(id * 7919) % " + (buildRows * 2) + " AS k", "id AS v")
              .cache();
      stream.count();
      List<Object> reference = null;
      double allgatherMedian = 0;
      for (Method m : methods) {
        Dataset<Row> joined = m.join().apply(stream, build);
        digest(joined); // warm-up
        long[] times = new long[runs];
        long heapPeak = 0;
        List<Object> answer = null;
        for (int r = 0; r < runs; r++) {
          System.gc();
          HeapSampler sampler = new HeapSampler();
          sampler.start();
          long start = System.nanoTime();
          answer = digest(m.join().apply(stream, build));
          times[r] = System.nanoTime() - start;
          heapPeak = Math.max(heapPeak, sampler.stopAndPeak());
        }
        if (reference == null) {
          reference = answer;
        } else if (!reference.equals(answer)) {
          throw new IllegalStateException(
              m.name() + " answered " + answer + ", allgather " + reference);
        }
        long[] sorted = times.clone();
        java.util.Arrays.sort(sorted);
        double median = sorted[runs / 2] / 1e6;
        if (m.name().equals("allgather")) {
          allgatherMedian = median;
        }
        String row =
            String.format(
                Locale.ROOT,
                "| %d | %d | %s | %.0f | %.0f-%.0f | %.2f | %d |%n",
                mib,
                buildRows,
                m.name(),
                median,
                sorted[0] / 1e6,
                sorted[runs - 1] / 1e6,
                median / allgatherMedian,
                heapPeak >> 20);
        System.out.print(row);
        md.append(row);
      }
      build.unpersist(true);
      stream.unpersist(true);
    }
    spark.stop();
    return md.toString();
  }

  /** Count and an order-free sum of row hashes: equal for equal multisets of rows. */
  private static List<Object> digest(Dataset<Row> df) {
    Row r = df.selectExpr("count(*)", "sum(CAST(hash(*) AS BIGINT))").first();
    return List.of(r.get(0), r.get(1) == null ? 0L : r.get(1));
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
