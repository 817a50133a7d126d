package io.npugather.spark;

import io.npugather.AllGatherParam;
import io.npugather.Backend;
import io.npugather.CommunicatorOptions.HostTransport;
import io.npugather.NativeLibrary;
import io.npugather.spark.rendezvous.RendezvousService;
import io.npugather.spark.rendezvous.RendezvousTicket;
import java.util.Iterator;
import java.util.Locale;
import java.util.UUID;
import org.apache.spark.Dependency;
import org.apache.spark.NarrowDependency;
import org.apache.spark.SparkContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.rdd.PartitionPruningRDD;
import org.apache.spark.rdd.RDD;
import org.apache.spark.rdd.ShuffledRDD;
import org.apache.spark.rdd.UnionRDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.UnsafeRowSerializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * The driver's part of one run ({@code allGatherOnNpu} or {@code onRanks}) before its barrier
 * stage: the checks, where ranks find their devices, the rendezvous registration, a fresh domain,
 * the stage's name, and the {@link RankTask} its tasks share. The registration ends with {@link
 * #close}, or with what {@link #unregisterWhenJobEnds} / {@link #unregisterWhenUnreachable} name.
 */
final class RunSetup implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(RunSetup.class);

  private final RankTask.Operation operation;
  private final int rankSize;
  private final AllGatherOptions options;
  private final RendezvousService service;
  private final RendezvousTicket ticket;
  private final RankTask ranks;

  private RunSetup(
      RankTask.Operation operation,
      int rankSize,
      AllGatherOptions options,
      RendezvousService service,
      RendezvousTicket ticket,
      RankTask ranks) {
    this.operation = operation;
    this.rankSize = rankSize;
    this.options = options;
    this.service = service;
    this.ticket = ticket;
    this.ranks = ranks;
  }

  /**
   * Checks a run of rankSize ranks before anything is launched (rankSize and rankRoot in range,
   * enough barrier slots, no dynamic allocation, a device for every rank where the backend needs
   * one) and registers it with the driver's rendezvous service; its ranks add their figures to
   * {@code metrics}.
   */
  static RunSetup prepare(
      SparkContext sc,
      RankTask.Operation operation,
      int rankSize,
      AllGatherOptions options,
      GatherMetrics metrics) {
    if (rankSize > AllGatherParam.MAX_RANK_SIZE) {
      // Before the slot check, which would wait for executors that can never be enough.
      throw new IllegalArgumentException(
          operation
              + ": the input has "
              + rankSize
              + " partitions, one rank each, and rankSize = "
              + rankSize
              + " is invalid; allowed: "
              + AllGatherParam.RANK_SIZE_ALLOWED
              + " (set "
              + AllGatherOptions.RANK_SIZE
              + " to repartition the input to fewer ranks)");
    }
    // The thin connector jar alone: one line naming the jars to add, before any task.
    NativeLibrary.requireClasses(RunSetup.class.getClassLoader());
    options.requireRootAmong(rankSize); // the calls check it; a join's gather is no call
    ClusterCheck.requireBarrierSlots(sc, rankSize);
    DeviceBinding devices = ClusterCheck.requireDevices(sc, options, rankSize);
    RendezvousService service = RendezvousService.getOrStart(sc);
    RendezvousTicket ticket = service.register(rankSize, options.timeout());
    String domain =
        (options.commDomain().isEmpty() ? "npg" : options.commDomain())
            + "-"
            + UUID.randomUUID().toString().substring(0, 8);
    return new RunSetup(
        operation,
        rankSize,
        options,
        service,
        ticket,
        new RankTask(operation, options, devices, ticket, domain, metrics));
  }

  /** What every task of the run ships and starts its rank with. */
  RankTask ranks() {
    return ranks;
  }

  /**
   * What runs, as Spark's UI names its stages: "allGatherOnNpu: 4 ranks, backend host (staging)",
   * "onRanks: 4 ranks, backend host".
   */
  String stageName() {
    String transport =
        operation == RankTask.Operation.ALL_GATHER
                && options.backendType() == Backend.HOST
                && options.hostTransport() != HostTransport.AUTO
            ? " (" + options.hostTransport().toString().toLowerCase(Locale.ROOT) + ")"
            : "";
    return operation + ": " + rankSize + " ranks, backend " + options.backend() + transport;
  }

  /** Keeps the registration while {@code owner} is reachable: any job may run the stage again. */
  void unregisterWhenUnreachable(Object owner) {
    service.unregisterWhenUnreachable(ticket, owner);
  }

  /** Keeps the registration until the job that computes RDD {@code rddId} ends. */
  void unregisterWhenJobEnds(int rddId) {
    service.unregisterWhenJobEnds(ticket, rddId);
  }

  /** Ends the registration: nothing waits on it any more. */
  @Override
  public void close() {
    service.unregister(ticket);
  }

  /**
   * {@code rows} itself, or, when its stage cannot run in barrier mode, its rows moved unchanged
   * through an identity shuffle (partition r to partition r, order kept) so that the barrier stage
   * starts after it.
   */
  static RDD<InternalRow> barrierReady(RDD<InternalRow> rows, int numFields) {
    if (!breaksBarrierStage(rows)) {
      return rows;
    }
    LOG.info(
        "allGatherOnNpu: the input's stage contains a union or partition pruning, which "
            + "Spark does not run in barrier mode; adding an identity shuffle before the gather");
    return identityShuffle(rows, numFields);
  }

  /**
   * True when the stage that computes {@code rdd} contains an RDD that Spark refuses in a barrier
   * stage (a union, or partition pruning): those need a stage boundary before the run.
   */
  static boolean breaksBarrierStage(RDD<?> rdd) {
    if (rdd instanceof UnionRDD<?> || rdd instanceof PartitionPruningRDD<?>) {
      return true;
    }
    for (Dependency<?> dependency : CollectionConverters.asJava(rdd.dependencies())) {
      if (dependency instanceof NarrowDependency<?> narrow && breaksBarrierStage(narrow.rdd())) {
        return true;
      }
    }
    return false;
  }

  /** Partition r's rows to partition r, through a shuffle. */
  static RDD<InternalRow> identityShuffle(RDD<InternalRow> rows, int numFields) {
    return shuffleToRanks(rows, rows.getNumPartitions(), numFields);
  }

  /**
   * Partition p's rows, in their order, to partition {@code p % ranks} of {@code ranks}, through a
   * shuffle without sorting. Whole partitions move, so the result does not depend on the order of
   * rows within a partition (a re-run map task sends the same rows to the same rank); with fewer
   * input partitions than ranks, the ranks past them are empty.
   */
  static RDD<InternalRow> shuffleToRanks(RDD<InternalRow> rows, int ranks, int numFields) {
    ClassTag<Integer> keyTag = ClassTag$.MODULE$.apply(Integer.class);
    ClassTag<InternalRow> rowTag = ClassTag$.MODULE$.apply(InternalRow.class);
    JavaRDD<Tuple2<Integer, InternalRow>> keyed =
        rows.toJavaRDD()
            .mapPartitionsWithIndex(
                (partition, it) ->
                    new Iterator<Tuple2<Integer, InternalRow>>() {
                      private final Integer rank = partition % ranks;

                      @Override
                      public boolean hasNext() {
                        return it.hasNext();
                      }

                      @Override
                      public Tuple2<Integer, InternalRow> next() {
                        return new Tuple2<>(rank, it.next().copy());
                      }
                    },
                false);
    ShuffledRDD<Integer, InternalRow, InternalRow> shuffled =
        new ShuffledRDD<>(keyed.rdd(), new RankPartitioner(ranks), keyTag, rowTag, rowTag);
    shuffled.setSerializer(new UnsafeRowSerializer(numFields, null));
    return shuffled.toJavaRDD().map(Tuple2::_2).rdd();
  }
}
