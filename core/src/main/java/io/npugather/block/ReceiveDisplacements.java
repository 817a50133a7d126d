package io.npugather.block;

import java.util.List;

/**
 * Where every block lands in one receive buffer of an all-gather-v whose members each send the
 * blocks of a group of ranks, one after another in the order the group lists them (a group of one
 * rank: that rank's block). The groups' places are the exclusive prefix sum of their sizes; every
 * entry is a multiple of 8. The group whose blocks are served from their own vectors ({@code
 * skippedGroup}) takes no room; its displacements are 0.
 */
public final class ReceiveDisplacements {
  private final long[] counts;
  private final long[] displacements;
  private final long[] rankDisplacements;
  private final long totalBytes;

  private ReceiveDisplacements(
      long[] counts, long[] displacements, long[] rankDisplacements, long totalBytes) {
    this.counts = counts;
    this.displacements = displacements;
    this.rankDisplacements = rankDisplacements;
    this.totalBytes = totalBytes;
  }

  /**
   * Every rank its own group.
   *
   * @param layouts every rank's layout, in rank order
   * @param skippedRank the rank whose block the buffer does not hold, or -1 to hold every block
   * @throws IllegalArgumentException if the total overflows
   */
  public static ReceiveDisplacements of(List<BlockLayout> layouts, int skippedRank) {
    int[][] groups = new int[layouts.size()][];
    for (int r = 0; r < groups.length; r++) {
      groups[r] = new int[] {r};
    }
    return of(layouts, groups, skippedRank);
  }

  /**
   * @param layouts every rank's layout, in rank order
   * @param groups the ranks of each member of the all-gather-v, in the order it sends their blocks;
   *     every rank in exactly one group
   * @param skippedGroup the group whose blocks the buffer does not hold, or -1 to hold every block
   * @throws IllegalArgumentException if the total overflows
   */
  public static ReceiveDisplacements of(
      List<BlockLayout> layouts, int[][] groups, int skippedGroup) {
    long[] counts = new long[groups.length];
    long[] displs = new long[groups.length];
    long[] rankDispls = new long[layouts.size()];
    long offset = 0;
    for (int g = 0; g < groups.length; g++) {
      long within = 0;
      for (int r : groups[g]) {
        long bytes = layouts.get(r).blockBytes();
        if (g != skippedGroup) {
          rankDispls[r] = addExact(offset, within, r);
        }
        within = addExact(within, bytes, r);
      }
      counts[g] = within;
      if (g == skippedGroup) {
        continue;
      }
      displs[g] = offset;
      offset = addExact(offset, within, groups[g].length == 0 ? -1 : groups[g][0]);
    }
    return new ReceiveDisplacements(counts, displs, rankDispls, offset);
  }

  private static long addExact(long a, long b, int rank) {
    if (a > Long.MAX_VALUE - b) {
      throw new IllegalArgumentException("total receive size overflows at rank " + rank);
    }
    return a + b;
  }

  /** Every group's bytes (the skipped group's too): the all-gather-v's counts. Returns a copy. */
  public long[] counts() {
    return counts.clone();
  }

  /** Every group's byte offset in the receive buffer. Returns a copy. */
  public long[] displacements() {
    return displacements.clone();
  }

  /** Every rank's byte offset in the receive buffer (0 for the skipped group's). Returns a copy. */
  public long[] rankDisplacements() {
    return rankDisplacements.clone();
  }

  /** Bytes of the receive buffer: every block but the skipped group's. */
  public long totalBytes() {
    return totalBytes;
  }
}
