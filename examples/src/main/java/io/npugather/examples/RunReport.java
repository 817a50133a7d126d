package io.npugather.examples;

import io.npugather.spark.GatherMetrics;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * What a run prints: a line per stage with the previous stage's time, and the summary at the end.
 * One per run.
 */
final class RunReport {
  private long stageStart;

  /** Prints a stage line; the previous stage's time goes on its own line first. */
  void stage(String format, Object... args) {
    long now = System.nanoTime();
    if (stageStart != 0) {
      System.out.printf(Locale.ROOT, "      done in %.1f s%n", (now - stageStart) / 1e9);
    }
    stageStart = now;
    if (format != null) {
      System.out.printf(Locale.ROOT, format, args);
    }
  }

  /**
   * This machine's copy rate in bytes per nanosecond (GB/s): 64 MiB between two off-heap buffers
   * already touched, the median of 5 copies, on the calling thread.
   */
  static double copyRate() {
    int size = 64 << 20;
    ByteBuffer source = ByteBuffer.allocateDirect(size);
    ByteBuffer target = ByteBuffer.allocateDirect(size);
    for (int i = 0; i < size; i += 4096) {
      source.put(i, (byte) i);
      target.put(i, (byte) 0);
    }
    long[] nanos = new long[5];
    for (int run = 0; run < nanos.length; run++) {
      long start = System.nanoTime();
      target.put(0, source, 0, size);
      nanos[run] = System.nanoTime() - start;
    }
    Arrays.sort(nanos);
    return (double) size / nanos[nanos.length / 2];
  }

  /** The summary of a finished run: the gather's metrics, the ranks' scoring, the check. */
  void printSummary(
      FeatureSharding.Result r,
      GatherMetrics m,
      List<long[]> perRank,
      long jobNanos,
      long rows,
      long expectedRows) {
    System.out.println();
    System.out.println("summary");
    System.out.printf(Locale.ROOT, "  ranks               %d%n", r.ranks());
    if (m != null) {
      int n = Math.max(1, r.ranks());
      double conversion = m.conversionNanos() / 1e6;
      double rendezvous = m.rendezvousNanos() / 1e6;
      double collective = m.collectiveNanos() / 1e6;
      double wall = (conversion + rendezvous + collective) / n;
      double receivedPerRank = (double) m.bytesReceived() / n;
      System.out.printf(
          Locale.ROOT,
          "  gathered            %d rows on all ranks (%d items x %d"
              + " ranks), %s received (%s per rank)%n",
          m.rowsGathered(),
          r.items(),
          r.ranks(),
          bytes(m.bytesReceived()),
          bytes((long) receivedPerRank));
      System.out.printf(
          Locale.ROOT,
          "  gather time         %-28s %s%n",
          "summed over ranks",
          "per rank (average)");
      System.out.printf(
          Locale.ROOT, "    rendezvous        %10.1f ms %26.1f ms%n", rendezvous, rendezvous / n);
      System.out.printf(
          Locale.ROOT, "    conversion        %10.1f ms %26.1f ms%n", conversion, conversion / n);
      System.out.printf(
          Locale.ROOT, "    collective        %10.1f ms %26.1f ms%n", collective, collective / n);
      System.out.printf(
          Locale.ROOT,
          "  gather wall time    %.1f ms per rank (conversion +" + " rendezvous + collective)%n",
          wall);
      double copyBytesPerNano = copyRate();
      double ownPerRank = (double) m.ownPartitionBytes() / n;
      System.out.printf(
          Locale.ROOT,
          "  against memcpy      %.1f GB/s here (hot, one thread); per rank, conversion %.1fx a"
              + " memcpy of its partition (%s), collective %.1fx a memcpy of what it received%n",
          copyBytesPerNano,
          ownPerRank > 0 ? conversion / n * 1e6 / (ownPerRank / copyBytesPerNano) : 0.0,
          bytes((long) ownPerRank),
          receivedPerRank > 0 ? collective / n * 1e6 / (receivedPerRank / copyBytesPerNano) : 0.0);
      System.out.printf(
          Locale.ROOT,
          "  effective bandwidth %.3f GB/s (bytes received per rank /"
              + " gather wall time); in the collective alone %.3f GB/s%n",
          wall > 0 ? receivedPerRank / (wall * 1e6) : 0.0,
          collective > 0 ? receivedPerRank / (collective / n * 1e6) : 0.0);
    }
    if (perRank.isEmpty()) {
      System.out.println(
          "  scoring             with SQL: the queries joined with the items by the ALLGATHER hint,"
              + " top-k by a window (in the job's time below)");
    } else {
      long maxScore = 0;
      long maxLoad = 0;
      for (long[] s : perRank) {
        maxLoad = Math.max(maxLoad, s[3]);
        maxScore = Math.max(maxScore, s[4]);
      }
      double macs = (double) r.items() * r.queries() * r.dim();
      System.out.printf(
          Locale.ROOT,
          "  scoring             %.1f ms (slowest rank), %.2e"
              + " multiply-adds, %.2f GFLOP/s over all ranks; loading items into arrays %.1f ms%n",
          maxScore / 1e6,
          macs,
          maxScore > 0 ? 2 * macs / maxScore : 0.0,
          maxLoad / 1e6);
      for (long[] s : perRank) {
        System.out.printf(
            Locale.ROOT,
            "    rank %-3d          %d items, %d queries, load %.1f ms," + " score %.1f ms%n",
            s[0],
            s[1],
            s[2],
            s[3] / 1e6,
            s[4] / 1e6);
      }
    }
    System.out.printf(
        Locale.ROOT, "  gather+score+write  %.1f ms (the Spark job)%n", jobNanos / 1e6);
    System.out.printf(
        Locale.ROOT,
        "  recommendations     %d rows (%d queries x top-%d%s) -> %s%n",
        rows,
        r.queries(),
        r.topK(),
        rows == expectedRows ? "" : ", EXPECTED " + expectedRows,
        r.recommendations());
    if (r.checkedQueries() > 0) {
      System.out.printf(
          Locale.ROOT,
          "check: %d/%d queries match plain Spark%n",
          r.matchingQueries(),
          r.checkedQueries());
    }
  }

  private static String bytes(long n) {
    if (n >= 1L << 30) {
      return String.format(Locale.ROOT, "%.2f GiB", n / (double) (1L << 30));
    }
    if (n >= 1L << 20) {
      return String.format(Locale.ROOT, "%.1f MiB", n / (double) (1L << 20));
    }
    return n + " B";
  }
}
