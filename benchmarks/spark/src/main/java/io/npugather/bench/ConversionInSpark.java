package io.npugather.bench;

import static org.apache.spark.sql.functions.array;
import static org.apache.spark.sql.functions.col;

import io.npugather.spark.GatherMetrics;
import io.npugather.spark.NpuAllGatherExec;
import io.npugather.spark.NpuGather;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.execution.SparkPlan;

/**
 * The conversion around the collective inside Spark: {@code allGatherOnNpu} on a cached DataFrame
 * in {@code local[ranks]}, per-rank conversion time from the run's metrics, and the time to gather
 * and read every gathered value as rows (Spark's generated ColumnarToRow over the gathered
 * batches). Arguments: ranks, MiB per rank, iterations, shape ({@code floats}: id bigint + 16 float
 * columns; {@code array}: id bigint + features array&lt;float&gt; of 16). Prints each iteration and
 * the medians after the first (warm-up) one. Command and figures:
 * docs/performance/2026-12-conversion.md.
 */
public final class ConversionInSpark {
  private ConversionInSpark() {}

  private static double median(List<Double> v) {
    List<Double> s = new ArrayList<>(v);
    Collections.sort(s);
    return s.get(s.size() / 2);
  }

  private static SparkPlan gatherNode(SparkPlan p) {
    return p instanceof NpuAllGatherExec ? p : gatherNode(p.children().head());
  }

  public static void main(String[] args) {
    int ranks = Integer.parseInt(args[0]);
    long mib = Long.parseLong(args[1]);
    int iterations = Integer.parseInt(args[2]);
    String shape = args.length > 3 ? args[3] : "floats";
    SparkSession spark =
        SparkSession.builder()
            .master("local[" + ranks + "]")
            .appName("ConversionInSpark")
            .config("spark.ui.enabled", "false")
            .getOrCreate();
    spark.sparkContext().setLogLevel("WARN");
    long rowsPerRank = mib * 1024 * 1024 / 72;
    Column[] cols = new Column[17];
    cols[0] = col("id");
    for (int k = 0; k < 16; k++) {
      cols[k + 1] =
          col("id").multiply(2654435761L + k).mod(1000003).divide(7.0).cast("float").as("f" + k);
    }
    Dataset<Row> df = spark.range(0, rowsPerRank * ranks, 1, ranks).toDF("id");
    df =
        shape.equals("array")
            ? df.select(col("id"), array(Arrays.copyOfRange(cols, 1, 17)).as("features"))
            : df.select(cols);
    df = df.cache();
    df.count();
    List<Double> gather = new ArrayList<>();
    List<Double> conversion = new ArrayList<>();
    List<Double> gatherRead = new ArrayList<>();
    for (int it = 0; it <= iterations; it++) {
      long t0 = System.nanoTime();
      Dataset<Row> gathered = NpuGather.allGatherOnNpu(df);
      gatherNode(gathered.queryExecution().executedPlan())
          .executeColumnar()
          .toJavaRDD()
          .foreachPartition(batches -> batches.forEachRemaining(b -> {}));
      long t1 = System.nanoTime();
      double conversionMs = GatherMetrics.of(gathered).conversionNanos() / 1e6 / ranks;
      double[] sums =
          NpuGather.allGatherOnNpu(df)
              .queryExecution()
              .toRdd()
              .toJavaRDD()
              .mapPartitions(
                  rows -> {
                    double s = 0;
                    while (rows.hasNext()) {
                      InternalRow r = rows.next();
                      s += r.getLong(1);
                      if (r.numFields() == 3) {
                        ArrayData a = r.getArray(2);
                        for (int j = 0; j < a.numElements(); j++) {
                          s += a.getFloat(j);
                        }
                      } else {
                        for (int j = 2; j < r.numFields(); j++) {
                          s += r.getFloat(j);
                        }
                      }
                    }
                    return List.of(s).iterator();
                  })
              .collect()
              .stream()
              .mapToDouble(Double::doubleValue)
              .toArray();
      long t2 = System.nanoTime();
      System.out.printf(
          "iteration %d: gather %.0f ms (conversion %.0f ms per rank), gather and "
              + "read every value %.0f ms, checksum %.6g%n",
          it, (t1 - t0) / 1e6, conversionMs, (t2 - t1) / 1e6, sums[0]);
      if (it > 0) {
        gather.add((t1 - t0) / 1e6);
        conversion.add(conversionMs);
        gatherRead.add((t2 - t1) / 1e6);
      }
    }
    System.out.printf(
        "median: %d ranks x %d MiB, %s: gather %.0f ms, conversion %.0f ms per rank,"
            + " gather and read %.0f ms%n",
        ranks, mib, shape, median(gather), median(conversion), median(gatherRead));
    spark.stop();
  }
}
