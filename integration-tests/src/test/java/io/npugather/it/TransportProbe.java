package io.npugather.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.AllGatherOperation;
import io.npugather.AllGatherParam;
import io.npugather.Communicator;
import io.npugather.CommunicatorOptions;
import io.npugather.CommunicatorOptions.HostTransport;
import io.npugather.DType;
import io.npugather.RootInfo;
import io.npugather.Tensor;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.SparkContext;
import org.apache.spark.api.java.JavaSparkContext;
import scala.collection.Iterator;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractFunction1;

/**
 * One barrier task per rank that joins a host communicator with the operator API and all-gathers an
 * int64 tensor; each rank reports the transport the backend chose, its pid and how many gathered
 * values were wrong.
 */
final class TransportProbe extends AbstractFunction1<Iterator<Object>, Iterator<String>>
    implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final int ELEMENTS = 1 << 16;

  private final int rankSize;
  private final HostTransport transport;

  private TransportProbe(int rankSize, HostTransport transport) {
    this.rankSize = rankSize;
    this.transport = transport;
  }

  /** What one rank saw: the transport chosen, its pid, wrong values, its network namespace. */
  record Rank(int rank, String transport, long pid, long wrongValues, String netNamespace) {
    static Rank parse(String line) {
      String[] f = line.split(" ");
      return new Rank(
          Integer.parseInt(f[0]), f[1], Long.parseLong(f[2]), Long.parseLong(f[3]), f[4]);
    }
  }

  /**
   * Runs the probe on {@code rankSize} ranks and checks that every rank is in its own executor JVM
   * of {@code cluster}, chose {@code expected} and received every value right.
   */
  static List<Rank> check(
      SparkCluster cluster, int rankSize, HostTransport transport, String expected) {
    List<Rank> ranks =
        run(cluster.spark().sparkContext(), rankSize, transport).stream().map(Rank::parse).toList();
    assertEquals(rankSize, ranks.size(), ranks.toString());
    List<Long> executorPids = cluster.executorPids();
    for (int r = 0; r < rankSize; r++) {
      Rank rank = ranks.get(r);
      assertEquals(r, rank.rank(), ranks.toString());
      assertEquals(expected, rank.transport(), "rank " + r + ": " + ranks);
      assertEquals(0, rank.wrongValues(), "rank " + r + ": " + ranks);
      assertTrue(
          executorPids.contains(rank.pid()),
          "rank " + r + " not in an executor JVM " + executorPids + ": " + ranks);
    }
    assertEquals(
        rankSize,
        ranks.stream().map(Rank::pid).distinct().count(),
        "ranks sharing a process: " + ranks);
    return ranks;
  }

  /** One line per rank, in rank order: {@code rank transport pid wrongValues netNamespace}. */
  static List<String> run(SparkContext sc, int rankSize, HostTransport transport) {
    List<Object> ranks = new java.util.ArrayList<>();
    for (int r = 0; r < rankSize; r++) {
      ranks.add(r);
    }
    Seq<Object> seq = CollectionConverters.asScala(ranks).toSeq();
    Object collected =
        JavaSparkContext.fromSparkContext(sc)
            .sc()
            .parallelize(seq, rankSize, ClassTag$.MODULE$.apply(Object.class))
            .barrier()
            .mapPartitions(
                new TransportProbe(rankSize, transport),
                false,
                ClassTag$.MODULE$.apply(String.class))
            .collect();
    return List.of((String[]) collected);
  }

  @Override
  public Iterator<String> apply(Iterator<Object> ignored) {
    BarrierTaskContext context = BarrierTaskContext.get();
    int rank = context.partitionId();
    CommunicatorOptions options =
        CommunicatorOptions.defaults()
            .withTimeout(Duration.ofSeconds(60))
            .withHostTransport(transport);
    String root = rank == 0 ? Communicator.createRootInfo("host", options).encode() : "";
    RootInfo rootInfo = RootInfo.decode(context.allGather(root)[0]);
    AllGatherParam param =
        AllGatherParam.builder().backend("host").rank(rank).rankSize(rankSize).rankRoot(0).build();
    long wrong = 0;
    String chosen;
    try (BufferAllocator allocator = new RootAllocator();
        Communicator comm = Communicator.create(param, rootInfo, options);
        Tensor x = Tensor.allocate(allocator, DType.INT64, ELEMENTS)) {
      chosen = comm.transport();
      for (long i = 0; i < ELEMENTS; i++) {
        x.buffer().setLong(8 * i, value(rank, i));
      }
      try (Tensor out = new AllGatherOperation(param).execute(comm, x, allocator)) {
        for (int r = 0; r < rankSize; r++) {
          for (long i = 0; i < ELEMENTS; i++) {
            if (out.buffer().getLong(8 * (r * (long) ELEMENTS + i)) != value(r, i)) {
              wrong++;
            }
          }
        }
      }
    }
    String line =
        rank
            + " "
            + chosen
            + " "
            + ProcessHandle.current().pid()
            + " "
            + wrong
            + " "
            + netNamespace();
    return CollectionConverters.asScala(List.of(line).iterator());
  }

  /** This process's network namespace, e.g. {@code net:[4026531840]}. */
  static String netNamespace() {
    try {
      return Files.readSymbolicLink(Path.of("/proc/self/ns/net")).toString();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static long value(int rank, long i) {
    return rank * 1_000_000_007L + i * 31;
  }
}
