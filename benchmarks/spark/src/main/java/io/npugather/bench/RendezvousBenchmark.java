package io.npugather.bench;

import io.npugather.spark.rendezvous.RendezvousClient;
import io.npugather.spark.rendezvous.RendezvousService;
import io.npugather.spark.rendezvous.RendezvousTicket;
import java.io.Serializable;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.rdd.RDD;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractFunction1;

/**
 * Latency of one metadata round for N ranks: the rendezvous service (ranks as threads, and ranks as
 * tasks of a barrier stage) against Spark's BarrierTaskContext.allGather in the same barrier stage.
 *
 * <pre>
 * bin/npugather-bench --rendezvous [ranks=8] [rounds=50] [warmup=100] [allGatherRounds=10]
 * </pre>
 *
 * Prints one line per measurement: median, p90, min and max of the per-round latency in ms.
 */
public final class RendezvousBenchmark {
  private RendezvousBenchmark() {}

  public static void main(String[] args) throws Exception {
    int ranks = args.length > 0 ? Integer.parseInt(args[0]) : 8;
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 50;
    int warmup = args.length > 2 ? Integer.parseInt(args[2]) : 100;
    int allGatherRounds = args.length > 3 ? Integer.parseInt(args[3]) : 10;

    SparkContext sc =
        new SparkContext(
            new SparkConf()
                .setMaster("local[" + ranks + "]")
                .setAppName("RendezvousBenchmark")
                .set("spark.ui.enabled", "false")
                .set("spark.ui.showConsoleProgress", "false"));
    try {
      RendezvousService service = RendezvousService.getOrStart(sc);
      System.out.printf(
          Locale.ROOT,
          "%nrendezvous benchmark: %d ranks, local[%d], %d cores available%n",
          ranks,
          ranks,
          Runtime.getRuntime().availableProcessors());

      // 1. ranks as threads of the driver JVM
      RendezvousTicket ticket = service.register(ranks, Duration.ofSeconds(60));
      ExecutorService pool = Executors.newFixedThreadPool(ranks);
      double[] threadMs = new double[rounds];
      for (int i = 0; i < warmup + rounds; i++) {
        int stage = i;
        CountDownLatch go = new CountDownLatch(1);
        List<Future<?>> futures = new ArrayList<>();
        for (int r = 0; r < ranks; r++) {
          int rank = r;
          futures.add(
              pool.submit(
                  () -> {
                    go.await();
                    return RendezvousClient.exchange(
                        ticket, stage, 0, rank, entry(rank), Duration.ofSeconds(60), () -> false);
                  }));
        }
        Thread.sleep(2); // let every thread park on the latch
        long t0 = System.nanoTime();
        go.countDown();
        for (Future<?> f : futures) {
          f.get();
        }
        if (i >= warmup) {
          threadMs[i - warmup] = (System.nanoTime() - t0) / 1e6;
        }
      }
      pool.shutdown();
      service.unregister(ticket);
      report(
          "rendezvous, " + ranks + " ranks as threads (release -> last rank has the table)",
          threadMs);

      // 2. ranks as tasks of a barrier stage: rendezvous rounds and BarrierTaskContext.allGather
      RendezvousTicket barrierTicket = service.register(ranks, Duration.ofSeconds(120));
      List<Integer> data = new ArrayList<>();
      for (int i = 0; i < ranks; i++) {
        data.add(i);
      }
      RDD<long[]> rdd =
          new JavaSparkContext(sc)
              .parallelize(data, ranks)
              .rdd()
              .barrier()
              .mapPartitions(
                  new BarrierRounds(barrierTicket, warmup, rounds, allGatherRounds),
                  false,
                  ClassTag$.MODULE$.apply(long[].class));
      service.unregisterWhenJobEnds(barrierTicket, rdd.id());
      long jobStart = System.nanoTime();
      long[][] perRank = (long[][]) rdd.collect();
      double jobMs = (System.nanoTime() - jobStart) / 1e6;
      // per round: the slowest rank's wait (all ranks leave a round together)
      double[] ours = new double[rounds];
      double[] spark = new double[allGatherRounds];
      for (long[] times : perRank) {
        for (int i = 0; i < rounds; i++) {
          ours[i] = Math.max(ours[i], times[i] / 1e6);
        }
        for (int i = 0; i < allGatherRounds; i++) {
          spark[i] = Math.max(spark[i], times[rounds + i] / 1e6);
        }
      }
      report("rendezvous, " + ranks + " ranks as barrier tasks in local[" + ranks + "]", ours);
      report("BarrierTaskContext.allGather, " + ranks + " ranks, same barrier stage", spark);
      System.out.printf(
          Locale.ROOT,
          "barrier job wall time: %.0f ms (%d+%d rendezvous rounds, %d allGather rounds)%n",
          jobMs,
          warmup,
          rounds,
          allGatherRounds);
      long deadline = System.nanoTime() + 10_000_000_000L;
      while (service.activeRegistrations() > 0 && System.nanoTime() < deadline) {
        Thread.sleep(10);
      }
      System.out.println("registrations left after the job: " + service.activeRegistrations());
    } finally {
      sc.stop();
    }
  }

  private static byte[] entry(int rank) {
    byte[] e = new byte[64]; // root info / host identity / partition metadata sized
    Arrays.fill(e, (byte) rank);
    return e;
  }

  private static void report(String what, double[] ms) {
    double[] sorted = ms.clone();
    Arrays.sort(sorted);
    System.out.printf(
        Locale.ROOT,
        "%-75s median %8.3f ms  p90 %8.3f ms  min %8.3f ms  max %8.3f ms  (n=%d)%n",
        what,
        sorted[sorted.length / 2],
        sorted[(int) Math.min(sorted.length - 1, Math.floor(sorted.length * 0.9))],
        sorted[0],
        sorted[sorted.length - 1],
        sorted.length);
  }

  /**
   * Each task: warm-up + measured rendezvous rounds, then allGather rounds; returns nanos per
   * round.
   */
  static final class BarrierRounds extends AbstractFunction1<Iterator<Integer>, Iterator<long[]>>
      implements Serializable {
    private static final long serialVersionUID = 1L;
    private final RendezvousTicket ticket;
    private final int warmup;
    private final int rounds;
    private final int allGatherRounds;

    BarrierRounds(RendezvousTicket ticket, int warmup, int rounds, int allGatherRounds) {
      this.ticket = ticket;
      this.warmup = warmup;
      this.rounds = rounds;
      this.allGatherRounds = allGatherRounds;
    }

    @Override
    public Iterator<long[]> apply(Iterator<Integer> rows) {
      BarrierTaskContext ctx = BarrierTaskContext.get();
      int rank = ctx.partitionId();
      long[] times = new long[rounds + allGatherRounds];
      // Round keys must be distinct per round: stage id * 100000 + round (one round per key).
      for (int i = 0; i < warmup + rounds; i++) {
        long t = System.nanoTime();
        RendezvousClient.exchange(
            ticket,
            ctx.stageId() * 100_000 + i,
            ctx.stageAttemptNumber(),
            rank,
            entry(rank),
            Duration.ofSeconds(60),
            ctx::isInterrupted);
        if (i >= warmup) {
          times[i - warmup] = System.nanoTime() - t;
        }
      }
      for (int i = 0; i < allGatherRounds; i++) {
        long t = System.nanoTime();
        ctx.allGather("rank-" + rank);
        times[rounds + i] = System.nanoTime() - t;
      }
      List<long[]> out = new ArrayList<>();
      out.add(times);
      return CollectionConverters.asScala(out.iterator());
    }
  }
}
