package io.npugather.examples;

import io.npugather.AllGatherOperation;
import io.npugather.AllGatherParam;
import io.npugather.CommMode;
import io.npugather.Communicator;
import io.npugather.CommunicatorOptions;
import io.npugather.DType;
import io.npugather.RootInfo;
import io.npugather.Tensor;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;

/**
 * The operator on its own: {@code --ranks N} ranks as threads of this JVM, backend host, each
 * holding a float32 feature shard {@code [rows, features]}; after the all-gather every rank holds
 * {@code [N, rows, features]}, checked value by value.
 *
 * <p>Options: {@code --ranks 4 --rows 65536 --features 64 --iterations 5}.
 */
public final class AllGatherDemo {
  private AllGatherDemo() {}

  public static void main(String[] args) throws Exception {
    int ranks = 4;
    long rows = 65_536;
    long features = 64;
    int iterations = 5;
    for (int i = 0; i < args.length; i++) {
      String value = i + 1 < args.length ? args[i + 1] : null;
      switch (args[i]) {
        case "--ranks" -> ranks = positive("--ranks", value);
        case "--rows" -> rows = positive("--rows", value);
        case "--features" -> features = positive("--features", value);
        case "--iterations" -> iterations = positive("--iterations", value);
        default ->
            throw new IllegalArgumentException(
                "unknown option '"
                    + args[i]
                    + "'; allowed: --ranks N, --rows N, --features N, --iterations N");
      }
      i++;
    }
    run(ranks, rows, features, iterations);
  }

  private static int positive(String option, String value) {
    try {
      int parsed = Integer.parseInt(value);
      if (parsed > 0) {
        return parsed;
      }
    } catch (NumberFormatException e) {
      // Reported below.
    }
    throw new IllegalArgumentException(option + " = " + value + "; allowed: a positive integer");
  }

  private static void run(int ranks, long rows, long features, int iterations) throws Exception {
    CommunicatorOptions options = CommunicatorOptions.defaults();
    AllGatherParam template =
        AllGatherParam.builder()
            .backend("host")
            .rankSize(ranks)
            .commMode(CommMode.COMM_MULTI_THREAD)
            .commDomain("demo")
            .build();
    System.out.printf(
        Locale.ROOT,
        "all-gather of float32[%d, %d] from %d ranks (threads, host)%n",
        rows,
        features,
        ranks);
    CompletableFuture<RootInfo> rootInfo = new CompletableFuture<>();
    ExecutorService pool = Executors.newFixedThreadPool(ranks);
    try (BufferAllocator allocator = new RootAllocator()) {
      List<Future<String>> results = new ArrayList<>();
      for (int r = 0; r < ranks; r++) {
        int rank = r;
        results.add(
            pool.submit(
                () -> {
                  if (rank == template.rankRoot()) {
                    rootInfo.complete(Communicator.createRootInfo("host", options));
                  }
                  AllGatherParam param = template.toBuilder().rank(rank).build();
                  try (Communicator comm =
                          Communicator.create(param, rootInfo.get(60, TimeUnit.SECONDS), options);
                      Tensor x = Tensor.allocate(allocator, DType.FLOAT32, rows, features)) {
                    fill(x, rank);
                    AllGatherOperation op = new AllGatherOperation(param);
                    long best = Long.MAX_VALUE;
                    String verdict = "";
                    for (int it = 0; it < iterations; it++) {
                      long start = System.nanoTime();
                      try (Tensor out = op.execute(comm, x, allocator)) {
                        best = Math.min(best, System.nanoTime() - start);
                        verdict = check(out, ranks, rows * features);
                      }
                    }
                    double gathered = (double) x.byteSize() * ranks;
                    return String.format(
                        Locale.ROOT,
                        "rank %d: %s, transport %s, best %.2f ms, %.2f GB/s gathered",
                        rank,
                        verdict,
                        comm.transport(),
                        best / 1e6,
                        gathered / best);
                  }
                }));
      }
      for (Future<String> result : results) {
        System.out.println(result.get(10, TimeUnit.MINUTES));
      }
    } finally {
      pool.shutdownNow();
    }
  }

  private static void fill(Tensor x, int rank) {
    SplittableRandom random = new SplittableRandom(rank);
    for (long i = 0; i < x.elementCount(); i++) {
      x.buffer().setFloat(4 * i, (float) random.nextDouble());
    }
  }

  private static String check(Tensor out, int ranks, long perRank) {
    for (int r = 0; r < ranks; r++) {
      SplittableRandom random = new SplittableRandom(r);
      for (long i = 0; i < perRank; i++) {
        float expected = (float) random.nextDouble();
        if (out.buffer().getFloat(4 * (r * perRank + i)) != expected) {
          return "WRONG value of rank " + r + " at " + i;
        }
      }
    }
    return "all " + ranks * perRank + " values correct";
  }
}
