package io.npugather.spark;

import io.npugather.DType;
import io.npugather.spark.connect.ConnectDataFrames;
import io.npugather.spark.connect.ConnectGather;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@code allGatherOnNpu}: every partition of a DataFrame, on every rank.
 *
 * <p>A barrier stage runs one task per partition (rank = partition id, rankSize = number of
 * partitions). The result has one partition per rank; partition r holds every input row, ordered by
 * source rank and then by the original order within each source partition, after an {@code int}
 * column naming the source rank ({@code source_rank} unless configured). Works with {@code
 * df.transform(NpuGather::allGatherOnNpu)}; from Scala, {@code import
 * io.npugather.spark.implicits._} gives {@code df.allGatherOnNpu()}, and on a {@code Dataset[T]} a
 * {@code Dataset[T]}. With {@code spark.sql.extensions=io.npugather.spark.NpuGatherExtensions}
 * every session plans the gather from its start; without it, the first call sets the session up.
 *
 * <p>{@code onRanks}: the tensor API inside barrier tasks, for model-parallel code. Every rank
 * turns its partition into a tensor, the ranks all-gather it with {@link
 * io.npugather.AllGatherOperation}, and a {@link RankFunction} runs on each rank with the gathered
 * tensor; the driver gets the functions' results in rank order.
 *
 * <p>A gather's figures (rows, bytes, times, transports) are its plan node's: {@link
 * GatherMetrics#of} reads them from the gathered DataFrame. This class only delegates and keeps
 * nothing between calls: the plans ({@code GatherPlans}, {@code OnRanksStage}) and the driver's
 * part of a run ({@code RunSetup}) do the work. Each method first checks that the operator API
 * ({@code npugather-core}) is on the classpath ({@link CoreClasspath}), so that a thin connector
 * jar alone fails with one line naming the jars to add.
 */
public final class NpuGather {
  private NpuGather() {}

  /**
   * With the session's defaults ({@code spark.npugather.*} conf entries). A DataFrame of Spark
   * Connect's client is gathered by the server ({@link ConnectGather}).
   */
  public static Dataset<Row> allGatherOnNpu(Dataset<Row> df) {
    CoreClasspath.require();
    Objects.requireNonNull(df, "df");
    if (ConnectDataFrames.isConnect(df)) {
      return ConnectGather.allGatherOnNpu(df, Map.of());
    }
    return allGatherOnNpu(
        df,
        AllGatherOptions.fromConf(CollectionConverters.asJava(df.sparkSession().conf().getAll())));
  }

  /**
   * With options given as {@code npugather.*} keys over the session's defaults; a DataFrame of
   * Spark Connect's client as well ({@link ConnectGather}).
   */
  public static Dataset<Row> allGatherOnNpu(Dataset<Row> df, Map<String, String> options) {
    CoreClasspath.require();
    Objects.requireNonNull(df, "df");
    Objects.requireNonNull(options, "options");
    if (ConnectDataFrames.isConnect(df)) {
      return ConnectGather.allGatherOnNpu(df, options);
    }
    return allGatherOnNpu(
        df,
        AllGatherOptions.fromConf(CollectionConverters.asJava(df.sparkSession().conf().getAll()))
            .with(options));
  }

  /**
   * With explicit options. When {@code options.rankSize()} is set and differs from the number of
   * partitions, the input is repartitioned (round-robin) to that many partitions first; the order
   * within a source rank is then the repartitioned order.
   */
  public static Dataset<Row> allGatherOnNpu(Dataset<Row> df, AllGatherOptions options) {
    CoreClasspath.require();
    Objects.requireNonNull(df, "df");
    Objects.requireNonNull(options, "options");
    return GatherPlans.allGatherOnNpu(df, options);
  }

  /**
   * {@link #onRanks(Dataset, List, AllGatherOptions, DType, RankFunction)} with the session's
   * defaults ({@code spark.npugather.*} conf entries) and float32 on the wire.
   */
  public static <T> List<T> onRanks(Dataset<Row> df, List<String> columns, RankFunction<T> fn) {
    CoreClasspath.require();
    Objects.requireNonNull(df, "df");
    return onRanks(
        df,
        columns,
        AllGatherOptions.fromConf(CollectionConverters.asJava(df.sparkSession().conf().getAll())),
        DType.FLOAT32,
        fn);
  }

  /**
   * Runs {@code fn} on every rank (one barrier task per partition: rank = partition id, rankSize =
   * number of partitions) with the all-gather of the ranks' tensors, and returns the results
   * indexed by rank. An action: it runs a Spark job and blocks until it ends.
   *
   * <p>On rank r, {@code x} = float32 {@code [rows, features]} is partition r's rows of {@code
   * columns}: either numeric columns (float, double, int, bigint, smallint, tinyint; converted to
   * float32, one feature per column, in the order given) or one {@code array<float>} column (one
   * feature per element; every row the same length, else the rank fails naming the row and the
   * lengths). Nulls are an error. Every rank must have the same shape, so every partition the same
   * number of rows: otherwise every rank fails with the same error listing each rank's shape. The
   * ranks all-gather x with {@link io.npugather.AllGatherOperation}, and {@code fn.apply(r,
   * gathered)} runs with {@code gathered} = {@code [rankSize, rows, features]}, rank the x of rank
   * q at index q.
   *
   * <p>{@code wireDtype} float16 or bfloat16 halves the bytes moved: each rank rounds its x to that
   * dtype (to nearest, ties to even; see {@link io.npugather.HalfFloats}) before the collective,
   * and {@code gathered} is then in that dtype ({@link io.npugather.HalfFloats#toFloat32} widens it
   * back). float32 sends x unchanged.
   *
   * <p>Memory: each task allocates from one child allocator ({@link
   * io.npugather.spark.memory.GatherMemory}) and releases all of it, {@code gathered} included,
   * before it ends. When {@code options.rankSize()} is set and differs from the number of
   * partitions, the input is repartitioned (round-robin) first. A rank that fails fails the job
   * with a {@link RankFailedException} (a {@code SparkException} with an error class and SQLSTATE)
   * whose cause is the rank's exception.
   *
   * @param columns the columns forming x, at least one
   * @param options backend, timeout, root rank, ... ({@code sourceRankColumn} and {@code retryable}
   *     do not apply)
   * @param wireDtype float32, float16 or bfloat16
   * @param fn runs on every rank; its results must be Serializable (or null)
   * @return the results, element r from rank r (unmodifiable)
   * @throws IllegalArgumentException when a column is missing or of another type, or the wire dtype
   *     is not a float type
   */
  @SuppressWarnings("unchecked")
  public static <T> List<T> onRanks(
      Dataset<Row> df,
      List<String> columns,
      AllGatherOptions options,
      DType wireDtype,
      RankFunction<T> fn) {
    CoreClasspath.require();
    Objects.requireNonNull(df, "df");
    Objects.requireNonNull(columns, "columns");
    Objects.requireNonNull(options, "options");
    Objects.requireNonNull(wireDtype, "wireDtype");
    Objects.requireNonNull(fn, "fn");
    return (List<T>)
        OnRanksStage.collect(
            df, columns, options, wireDtype, (RankFunction<Object>) (RankFunction<?>) fn);
  }

  /**
   * {@code df} marked as the build side of the joins it takes part in: it is all-gathered onto
   * every executor (one rank per task slot), built there once per executor and joined with the
   * other side where that lies, never passing through the driver — as the hint {@code ALLGATHER}
   * does with the SQL extension ({@code SELECT /*+ ALLGATHER(items) *}{@code / ...}, {@code
   * df.hint("allgather")}). Spark's hash join for equi-joins (null-safe keys included), its
   * nested-loop join otherwise; inner joins, left outer, semi and anti joins with {@code df} on the
   * right, right outer joins with {@code df} on the left. Elsewhere the mark changes nothing.
   */
  public static Dataset<Row> broadcastOnExecutors(Dataset<Row> df) {
    CoreClasspath.require();
    Objects.requireNonNull(df, "df");
    return GatherPlans.broadcastOnExecutors(df);
  }

  /**
   * The result of {@link #allGatherOnNpu} as its columnar batches, for code that reads the gathered
   * columns whole: partition r holds one batch per source rank, in rank order, each with the int
   * source-rank column first, then the columns over the gathered Arrow vectors, read in place.
   * Columns of fixed-width types and arrays of them are {@link
   * io.npugather.spark.arrow.ArrowBackedColumn}s whose bulk reads ({@code getFloats(0, n)}; of an
   * array column's elements, all rows' at once, {@code getChild(0).getFloats(0, n)}) are one memory
   * copy each; other columns are Spark's {@code ArrowColumnVector}s; both give their Arrow vector
   * ({@code getValueVector()}). A batch is valid while the task that reads it runs; do not close
   * it.
   *
   * @param gathered what {@code allGatherOnNpu} returned, with no operation after it
   * @throws IllegalArgumentException if {@code gathered} is not such a result
   */
  public static JavaRDD<ColumnarBatch> gatheredBatches(Dataset<Row> gathered) {
    CoreClasspath.require();
    Objects.requireNonNull(gathered, "gathered");
    return GatherPlans.gatheredBatches(gathered);
  }
}
