package io.npugather.spark;

import io.npugather.Backend;
import java.io.Serializable;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.execution.metric.SQLMetric;
import org.apache.spark.sql.execution.metric.SQLMetrics;

/**
 * A gather's figures as Spark SQL metrics, summed over the ranks of its runs: the gather's plan
 * node holds them and shows them in the SQL tab of the Spark UI (timings with their min, median and
 * max over the ranks), and {@link #of} gives them to the caller. Which transport the ranks used is
 * a count of ranks per transport.
 */
public final class GatherMetrics implements Serializable {
  private static final long serialVersionUID = 1L;

  private final Map<String, SQLMetric> metrics = new LinkedHashMap<>();
  private final SQLMetric inputRows;
  private final SQLMetric outputRows;
  private final SQLMetric inputBytes;
  private final SQLMetric outputBytes;
  private final SQLMetric bytesSent;
  private final SQLMetric bytesReceived;
  private final SQLMetric ownPartitionBytes;
  private final SQLMetric peakOffHeapBytes;
  private final SQLMetric conversionNanos;
  private final SQLMetric rendezvousNanos;
  private final SQLMetric slowestRankWaitNanos;
  private final SQLMetric collectiveNanos;
  private volatile String input = "";

  /**
   * The figures of the gather in {@code gathered}: what {@link NpuGather#allGatherOnNpu} returned,
   * or a DataFrame made from it (a projection, a join, the SQL function {@code all_gather_on_npu}'s
   * query). They add up over every run of the gather, by the actions on {@code gathered} and on the
   * DataFrames made from it: an action that reads the kept output adds nothing, one that gathers
   * again adds a run. Read them after the action; they are zero before the first run.
   *
   * @throws IllegalArgumentException when {@code gathered} holds no gather or several, or is a
   *     DataFrame of Spark Connect's client (whose gathers run, and count, on the server)
   */
  public static GatherMetrics of(Dataset<?> gathered) {
    Objects.requireNonNull(gathered, "gathered");
    return GatherPlans.metricsOf(gathered);
  }

  /**
   * A gather's metrics, registered with {@code sc}: a count of ranks for every transport of every
   * backend, since a plan may hold the gather before its backend is known.
   */
  GatherMetrics(SparkContext sc) {
    inputRows = add("numInputRows", SQLMetrics.createMetric(sc, "number of input rows"));
    outputRows = add("numOutputRows", SQLMetrics.createMetric(sc, "number of output rows"));
    inputBytes = add("inputBytes", SQLMetrics.createSizeMetric(sc, "input size", -1L));
    outputBytes = add("outputBytes", SQLMetrics.createSizeMetric(sc, "output size", -1L));
    bytesSent = add("bytesSent", SQLMetrics.createSizeMetric(sc, "bytes sent", -1L));
    bytesReceived = add("bytesReceived", SQLMetrics.createSizeMetric(sc, "bytes received", -1L));
    ownPartitionBytes =
        add(
            "ownPartitionBytes",
            SQLMetrics.createSizeMetric(sc, "off-heap memory of the own partition", -1L));
    peakOffHeapBytes =
        add("peakOffHeapBytes", SQLMetrics.createSizeMetric(sc, "peak off-heap memory", -1L));
    conversionNanos =
        add(
            "conversionTime",
            SQLMetrics.createNanoTimingMetric(sc, "time converting to Arrow", -1L));
    rendezvousNanos =
        add("rendezvousTime", SQLMetrics.createNanoTimingMetric(sc, "time in rendezvous", -1L));
    slowestRankWaitNanos =
        add(
            "slowestRankWait",
            SQLMetrics.createNanoTimingMetric(sc, "wait for the slowest rank", -1L));
    collectiveNanos =
        add("collectiveTime", SQLMetrics.createNanoTimingMetric(sc, "time in collective", -1L));
    for (Backend backend : Backend.values()) {
      for (String transport : backend.transports()) {
        if (!metrics.containsKey(transportKey(transport))) {
          add(transportKey(transport), SQLMetrics.createMetric(sc, "ranks over " + transport));
        }
      }
    }
  }

  private SQLMetric add(String key, SQLMetric metric) {
    metrics.put(key, metric);
    return metric;
  }

  private static String transportKey(String transport) {
    return "ranksOver_" + transport;
  }

  /**
   * The metrics a plan node gathering on {@code backend} ({@link AllGatherOptions#backend()}'s
   * name) shows, by key, in its order: every one but the counts of other backends' transports.
   */
  Map<String, SQLMetric> byKey(String backend) {
    List<String> transports = Backend.parse("backend", backend).transports();
    Map<String, SQLMetric> shown = new LinkedHashMap<>();
    metrics.forEach(
        (key, metric) -> {
          if (!key.startsWith(transportKey(""))
              || transports.contains(key.substring(transportKey("").length()))) {
            shown.put(key, metric);
          }
        });
    return Collections.unmodifiableMap(shown);
  }

  void recordInput(String input) {
    this.input = input;
  }

  /**
   * What the ranks converted: "cached batches" (Spark's cached bytes), "columnar batches" or
   * "rows"; empty for runs without a DataFrame input.
   */
  public String input() {
    return input;
  }

  void addMemory(long ownPartition, long peakOffHeap) {
    ownPartitionBytes.add(ownPartition);
    peakOffHeapBytes.add(peakOffHeap);
  }

  void addTask(
      long sent, long received, long rows, long conversion, long rendezvous, long collective) {
    bytesSent.add(sent);
    bytesReceived.add(received);
    outputRows.add(rows);
    conversionNanos.add(conversion);
    rendezvousNanos.add(rendezvous);
    collectiveNanos.add(collective);
  }

  /** One rank's input (its own partition) and output (every rank's partition), in Arrow bytes. */
  void addRankData(long rowsIn, long bytesIn, long bytesOut) {
    inputRows.add(rowsIn);
    inputBytes.add(bytesIn);
    outputBytes.add(bytesOut);
  }

  /** One rank's wait for the slowest rank and the transport its communicator used. */
  void addRankGroup(long slowestRankWait, String transport) {
    slowestRankWaitNanos.add(slowestRankWait);
    SQLMetric ranks = metrics.get(transportKey(transport));
    if (ranks != null) {
      ranks.add(1);
    }
  }

  private static long valueOf(SQLMetric metric) {
    return Math.max(0, metric.value()); // a size or timing metric nothing was added to is -1
  }

  /** Rows of the ranks' own partitions, summed over ranks: the rows of the input. */
  public long inputRows() {
    return valueOf(inputRows);
  }

  /** Rows in the output, summed over ranks. */
  public long rowsGathered() {
    return valueOf(outputRows);
  }

  /** Bytes of the ranks' own partitions in Arrow, summed over ranks. */
  public long inputBytes() {
    return valueOf(inputBytes);
  }

  /** Bytes of the ranks' gathered partitions in Arrow, summed over ranks. */
  public long outputBytes() {
    return valueOf(outputBytes);
  }

  /** Off-heap bytes of the ranks' own Arrow partitions, summed over ranks. */
  public long ownPartitionBytes() {
    return valueOf(ownPartitionBytes);
  }

  /** Peak off-heap bytes of each rank's task allocator, summed over ranks. */
  public long peakOffHeapBytes() {
    return valueOf(peakOffHeapBytes);
  }

  /** Bytes all ranks sent from their own partitions (each rank's block counts once per peer). */
  public long bytesSent() {
    return valueOf(bytesSent);
  }

  /** Bytes all ranks received from their peers. */
  public long bytesReceived() {
    return valueOf(bytesReceived);
  }

  /** Time converting rows to Arrow, summed over ranks. */
  public long conversionNanos() {
    return valueOf(conversionNanos);
  }

  /** Time in the rendezvous round, summed over ranks. */
  public long rendezvousNanos() {
    return valueOf(rendezvousNanos);
  }

  /** Time each rank waited in the rendezvous for the last rank to arrive, summed over ranks. */
  public long slowestRankWaitNanos() {
    return valueOf(slowestRankWaitNanos);
  }

  /** Time creating the communicator and moving the data, summed over ranks. */
  public long collectiveNanos() {
    return valueOf(collectiveNanos);
  }

  /**
   * The transports the ranks' communicators used, with the number of ranks on each ({@code
   * "threads"}, {@code "cma"}, {@code "staging"}, {@code "tcp"} for backend host; the backend's
   * name otherwise); empty before the ranks ran.
   */
  public Map<String, Long> transports() {
    Map<String, Long> used = new LinkedHashMap<>();
    metrics.forEach(
        (key, metric) -> {
          if (key.startsWith(transportKey("")) && valueOf(metric) > 0) {
            used.put(key.substring(transportKey("").length()), valueOf(metric));
          }
        });
    return used;
  }

  @Override
  public String toString() {
    return String.format(
        "%ssent %d B, received %d B, %d rows; conversion %.1f ms, rendezvous %.1f"
            + " ms (waiting for the slowest rank %.1f ms), collective %.1f ms over %s; own partitions"
            + " %d B, peak off-heap %d B (summed over ranks)",
        input.isEmpty() ? "" : input + " input; ",
        bytesSent(),
        bytesReceived(),
        rowsGathered(),
        conversionNanos() / 1e6,
        rendezvousNanos() / 1e6,
        slowestRankWaitNanos() / 1e6,
        collectiveNanos() / 1e6,
        transports(),
        ownPartitionBytes(),
        peakOffHeapBytes());
  }
}
