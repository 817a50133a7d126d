package io.npugather.it;

import io.npugather.AllGatherOperation;
import io.npugather.AllGatherParam;
import io.npugather.Communicator;
import io.npugather.CommunicatorOptions;
import io.npugather.CommunicatorOptions.HostTransport;
import io.npugather.DType;
import io.npugather.RootInfo;
import io.npugather.Tensor;
import java.io.Serializable;
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
 * One barrier task per rank that joins a host communicator with the operator API and
 * all-gathers an int64 tensor; each rank reports the transport the backend chose, its pid and
 * how many gathered values were wrong.
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

  /** One line per rank, in rank order: {@code rank transport pid wrongValues}. */
  static List<String> run(SparkContext sc, int rankSize, HostTransport transport) {
    List<Object> ranks = new java.util.ArrayList<>();
    for (int r = 0; r < rankSize; r++) {
      ranks.add(r);
    }
    Seq<Object> seq = CollectionConverters.asScala(ranks).toSeq();
    Object collected = JavaSparkContext.fromSparkContext(sc).sc()
        .parallelize(seq, rankSize, ClassTag$.MODULE$.apply(Object.class))
        .barrier()
        .mapPartitions(new TransportProbe(rankSize, transport), false,
            ClassTag$.MODULE$.apply(String.class))
        .collect();
    return List.of((String[]) collected);
  }

  @Override
  public Iterator<String> apply(Iterator<Object> ignored) {
    BarrierTaskContext context = BarrierTaskContext.get();
    int rank = context.partitionId();
    CommunicatorOptions options = CommunicatorOptions.defaults()
        .withTimeout(Duration.ofSeconds(60)).withHostTransport(transport);
    String root = rank == 0 ? Communicator.createRootInfo("host", options).encode() : "";
    RootInfo rootInfo = RootInfo.decode(context.allGather(root)[0]);
    AllGatherParam param = AllGatherParam.builder().backend("host").rank(rank)
        .rankSize(rankSize).rankRoot(0).build();
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
    String line = rank + " " + chosen + " " + ProcessHandle.current().pid() + " " + wrong;
    return CollectionConverters.asScala(List.of(line).iterator());
  }

  private static long value(int rank, long i) {
    return rank * 1_000_000_007L + i * 31;
  }
}
