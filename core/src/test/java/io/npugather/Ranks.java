package io.npugather;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/** Runs a group of ranks as threads of this JVM, each with its own communicator. */
final class Ranks {
  private Ranks() {}

  /** What one rank does with its communicator. */
  interface Body<T> {
    T run(int rank, Communicator communicator) throws Exception;
  }

  /** One rank's result or failure. */
  record Outcome<T>(int rank, T value, Throwable error) {
    T get() {
      if (error != null) {
        throw new AssertionError("rank " + rank + " failed: " + error, error);
      }
      return value;
    }
  }

  static AllGatherParam.Builder hostParam(int rankSize) {
    return AllGatherParam.builder()
        .backend("host")
        .rankSize(rankSize)
        .commMode(CommMode.COMM_MULTI_THREAD)
        .commDomain("test-" + UUID.randomUUID().toString().substring(0, 8));
  }

  /** Runs every rank and returns their outcomes; never hangs past {@code 3 x timeout + 30 s}. */
  static <T> List<Outcome<T>> run(
      AllGatherParam.Builder param, CommunicatorOptions options, Body<T> body) throws Exception {
    AllGatherParam template = param.build();
    int rankSize = template.rankSize();
    CompletableFuture<RootInfo> rootInfo = new CompletableFuture<>();
    ExecutorService pool = Executors.newFixedThreadPool(rankSize);
    try {
      List<Future<T>> futures = new ArrayList<>();
      for (int r = 0; r < rankSize; r++) {
        int rank = r;
        futures.add(
            pool.submit(
                () -> {
                  if (rank == template.rankRoot()) {
                    try {
                      rootInfo.complete(Communicator.createRootInfo(template.backend(), options));
                    } catch (RuntimeException e) {
                      rootInfo.completeExceptionally(e);
                      throw e;
                    }
                  }
                  RootInfo info = rootInfo.get(options.timeout().toMillis(), TimeUnit.MILLISECONDS);
                  try (Communicator communicator =
                      Communicator.create(template.toBuilder().rank(rank).build(), info, options)) {
                    return body.run(rank, communicator);
                  }
                }));
      }
      long deadline =
          System.nanoTime()
              + options.timeout().multipliedBy(3).plus(Duration.ofSeconds(30)).toNanos();
      List<Outcome<T>> outcomes = new ArrayList<>();
      for (int r = 0; r < rankSize; r++) {
        try {
          long left = Math.max(1, deadline - System.nanoTime());
          outcomes.add(new Outcome<>(r, futures.get(r).get(left, TimeUnit.NANOSECONDS), null));
        } catch (java.util.concurrent.ExecutionException e) {
          outcomes.add(new Outcome<>(r, null, e.getCause()));
        }
      }
      return outcomes;
    } finally {
      pool.shutdownNow();
      if (!pool.awaitTermination(30, TimeUnit.SECONDS)) {
        throw new AssertionError("rank threads did not end");
      }
    }
  }

  static <T> List<T> values(List<Outcome<T>> outcomes) {
    List<T> values = new ArrayList<>();
    for (Outcome<T> outcome : outcomes) {
      values.add(outcome.get());
    }
    return values;
  }
}
