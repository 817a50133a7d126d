package io.npugather.bench;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.Function;

/** The command line of {@code bin/npugather-bench}; see {@link #USAGE}. */
record BenchOptions(
    List<Integer> ranks,
    List<Long> sizes,
    List<Shape> shapes,
    List<String> methods,
    List<String> masters,
    List<Integer> ranksPerExecutor,
    int runs,
    int warmup,
    Path output,
    Path csv,
    int executorMemoryMb,
    String executorJavaOptions,
    boolean checkHashRepartition) {

  static final String USAGE =
      String.join(
          "\n",
          "usage: npugather-bench [options]",
          "  --ranks 2,4            ranks (= partitions = concurrent tasks); default 2,4",
          "  --sizes 4M,64M         payload bytes per partition (K, M, G: binary); default 4M,64M",
          "  --shapes LIST          of floats (id bigint + 16 float columns), vector (id bigint +",
          "                         array<float> of 64), mixed (id bigint + string +",
          "                         struct<x float, y float, label string>); default all",
          "  --methods LIST         of npu, npu-per-rank, broadcast, barrier-strings, shuffle, floor;",
          "                         default all",
          "  --masters local,cluster local: local[N], every rank in the driver JVM; cluster:",
          "                         local-cluster[N/k,k,mem], executor JVMs of k ranks each;",
          "                         default both",
          "  --ranks-per-executor 1,2  k for cluster: ranks per executor JVM, each a divisor of",
          "                         every --ranks; default 1 (one executor JVM per rank)",
          "  --runs N               measured runs per method and shape (median, min-max); default 5",
          "  --warmup N             unmeasured runs first; default 1",
          "  --output FILE          also write the markdown report to FILE",
          "  --csv FILE             also write every measurement as a CSV row to FILE (the input",
          "                         of --chart: bin/npugather-bench --chart --help)",
          "  --executor-memory-mb N executor JVM heap in cluster mode; default 2048",
          "  --executor-java-options S  extra executor JVM options in cluster mode",
          "  --check-hash-repartition   also run repartition(N, col(\"target\")) and report whether",
          "                         it replicates correctly (it does not: targets collide)",
          "Methods run interleaved (round r rotates their order), each on the same cached input;",
          "every output partition's row count and checksum are verified. Exit status 0, 1 if any",
          "output was wrong, 2 for bad options.");

  static BenchOptions parse(String... args) {
    List<Integer> ranks = List.of(2, 4);
    List<Long> sizes = List.of(4L << 20, 64L << 20);
    List<Shape> shapes = List.of(Shape.values());
    List<String> methods = GatherMethod.NAMES;
    List<String> masters = List.of("local", "cluster");
    List<Integer> ranksPerExecutor = null;
    int runs = 5;
    int warmup = 1;
    Path output = null;
    Path csv = null;
    int executorMemoryMb = 2048;
    String executorJavaOptions = "";
    boolean checkHash = false;
    for (int i = 0; i < args.length; i++) {
      String flag = args[i];
      if (flag.equals("--check-hash-repartition")) {
        checkHash = true;
        continue;
      }
      if (i + 1 >= args.length) {
        throw new IllegalArgumentException(flag + ": missing value\n" + USAGE);
      }
      String value = args[++i];
      switch (flag) {
        case "--ranks" -> ranks = list(flag, value, v -> positive(flag, v, 2));
        case "--sizes" -> sizes = list(flag, value, v -> bytes(flag, v));
        case "--shapes" -> shapes = list(flag, value, Shape::parse);
        case "--methods" -> methods = list(flag, value, v -> GatherMethod.named(v).name());
        case "--masters" -> masters = list(flag, value, v -> master(flag, v));
        case "--ranks-per-executor" ->
            ranksPerExecutor = list(flag, value, v -> positive(flag, v, 1));
        case "--runs" -> runs = positive(flag, value, 1);
        case "--warmup" -> warmup = positive(flag, value, 0);
        case "--output" -> output = Path.of(value);
        case "--csv" -> csv = Path.of(value);
        case "--executor-memory-mb" -> executorMemoryMb = positive(flag, value, 256);
        case "--executor-java-options" -> executorJavaOptions = value;
        default -> throw new IllegalArgumentException("unknown option " + flag + "\n" + USAGE);
      }
    }
    if (ranksPerExecutor == null) {
      ranksPerExecutor = List.of(1);
    } else {
      checkRanksPerExecutor(ranksPerExecutor, ranks, masters);
    }
    return new BenchOptions(
        ranks,
        sizes,
        shapes,
        methods,
        masters,
        ranksPerExecutor,
        runs,
        warmup,
        output,
        csv,
        executorMemoryMb,
        executorJavaOptions,
        checkHash);
  }

  /**
   * Every executor JVM runs the same number of ranks, so each k divides every rank count; k applies
   * only to executor JVMs (in local[N] the one JVM runs all N).
   */
  private static void checkRanksPerExecutor(
      List<Integer> ranksPerExecutor, List<Integer> ranks, List<String> masters) {
    if (!masters.contains("cluster")) {
      throw new IllegalArgumentException(
          "--ranks-per-executor: applies to --masters cluster (executor JVMs), not to "
              + String.join(",", masters)
              + " (in local[N] the driver JVM runs all N ranks)");
    }
    for (int k : ranksPerExecutor) {
      for (int n : ranks) {
        if (n % k != 0) {
          throw new IllegalArgumentException(
              "--ranks-per-executor: "
                  + k
                  + " does not divide --ranks "
                  + n
                  + " (every executor JVM runs the same number of ranks); allowed: divisors of"
                  + " every rank count "
                  + ranks);
        }
      }
    }
  }

  private static <T> List<T> list(String flag, String value, Function<String, T> parse) {
    List<T> items = new ArrayList<>();
    for (String part : value.split(",")) {
      if (!part.isBlank()) {
        T item = parse.apply(part.trim());
        if (!items.contains(item)) {
          items.add(item);
        }
      }
    }
    if (items.isEmpty()) {
      throw new IllegalArgumentException(flag + ": empty list '" + value + "'");
    }
    return List.copyOf(items);
  }

  private static int positive(String flag, String value, int min) {
    try {
      int n = Integer.parseInt(value);
      if (n >= min) {
        return n;
      }
    } catch (NumberFormatException e) {
      // reported below
    }
    throw new IllegalArgumentException(flag + ": '" + value + "' is not an integer >= " + min);
  }

  static long bytes(String flag, String value) {
    String v = value.toUpperCase(Locale.ROOT);
    int shift =
        switch (v.isEmpty() ? ' ' : v.charAt(v.length() - 1)) {
          case 'K' -> 10;
          case 'M' -> 20;
          case 'G' -> 30;
          default -> 0;
        };
    String digits = shift == 0 ? v : v.substring(0, v.length() - 1);
    try {
      long n = Long.parseLong(digits) << shift;
      if (n >= 1024 && n <= (1L << 30)) {
        return n;
      }
    } catch (NumberFormatException e) {
      // reported below
    }
    throw new IllegalArgumentException(
        flag
            + ": '"
            + value
            + "' is not a size from 1K to 1G (a number with an optional K, M or G suffix)");
  }

  private static String master(String flag, String value) {
    String v = value.toLowerCase(Locale.ROOT);
    if (!v.equals("local") && !v.equals("cluster")) {
      throw new IllegalArgumentException(
          flag
              + ": unknown master '"
              + value
              + "'; allowed: local (local[N]), cluster (local-cluster[N/k,k,mem], executor JVMs of k ranks:"
              + " --ranks-per-executor)");
    }
    return v;
  }
}
