package io.npugather.block;

import java.util.List;

/**
 * Where every rank's block lands in one receive buffer of an all-gather-v: the exclusive prefix sum
 * of the blocks' sizes, every entry a multiple of 8. A rank whose block is served from its own
 * vectors ({@code skippedRank}) takes no room; its displacement is 0.
 */
public final class ReceiveDisplacements {
  private final long[] counts;
  private final long[] displacements;
  private final long totalBytes;

  private ReceiveDisplacements(long[] counts, long[] displacements, long totalBytes) {
    this.counts = counts;
    this.displacements = displacements;
    this.totalBytes = totalBytes;
  }

  /**
   * @param layouts every rank's layout, in rank order
   * @param skippedRank the rank whose block the buffer does not hold, or -1 to hold every block
   * @throws IllegalArgumentException if the total overflows
   */
  public static ReceiveDisplacements of(List<BlockLayout> layouts, int skippedRank) {
    int ranks = layouts.size();
    long[] counts = new long[ranks];
    long[] displs = new long[ranks];
    long offset = 0;
    for (int r = 0; r < ranks; r++) {
      counts[r] = layouts.get(r).blockBytes();
      if (r == skippedRank) {
        continue;
      }
      displs[r] = offset;
      if (offset > Long.MAX_VALUE - counts[r]) {
        throw new IllegalArgumentException("total receive size overflows at rank " + r);
      }
      offset += counts[r];
    }
    return new ReceiveDisplacements(counts, displs, offset);
  }

  /** Every rank's block size in bytes (the skipped rank's too). Returns a copy. */
  public long[] counts() {
    return counts.clone();
  }

  /** Every rank's byte offset in the receive buffer. Returns a copy. */
  public long[] displacements() {
    return displacements.clone();
  }

  /** Bytes of the receive buffer: every block but the skipped rank's. */
  public long totalBytes() {
    return totalBytes;
  }
}
