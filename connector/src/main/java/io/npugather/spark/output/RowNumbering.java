package io.npugather.spark.output;

import java.util.Arrays;

/**
 * The rows of a gathered output numbered across its batches in rank order, as the indexes of its
 * rows by key ({@link LongRowIndex}, {@link KeyRowIndex}) number them: which batch holds a row, and
 * where in it.
 */
public final class RowNumbering {
  /** Rows are numbered in ints, and a table of at most 2^30 slots holds half as many keys. */
  public static final int MAX_ROWS = 1 << 29;

  private final int[] starts; // the first row of every batch, then the number of rows

  private RowNumbering(int[] starts) {
    this.starts = starts;
  }

  /** The batch that holds {@code row}. */
  public int batchOf(int row) {
    int lo = 0;
    int hi = starts.length - 2; // the last batch
    while (lo < hi) { // the last batch starting at or before row: empty batches are skipped
      int mid = (lo + hi + 1) >>> 1;
      if (starts[mid] <= row) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return lo;
  }

  /** The number of the first row of {@code batch}. */
  public int batchStart(int batch) {
    return starts[batch];
  }

  /** The number of batches. */
  public int batches() {
    return starts.length - 1;
  }

  /** {@code rows}, when an index can number that many rows. */
  static int checkedRows(long rows) {
    if (rows < 0 || rows > MAX_ROWS) {
      throw new IllegalArgumentException(
          "a gathered build side of "
              + rows
              + " rows cannot be indexed: at most "
              + MAX_ROWS
              + " rows, as Spark's own relation allows");
    }
    return (int) rows;
  }

  long bytes() {
    return 4L * starts.length;
  }

  /** The batches' ends, one after another. */
  static final class Builder {
    private int[] starts = {0};

    /** The current batch ends, {@code rows} rows into the output. */
    void endBatch(int rows) {
      starts = Arrays.copyOf(starts, starts.length + 1);
      starts[starts.length - 1] = rows;
    }

    RowNumbering build(int rows) {
      if (starts.length < 2) {
        throw new IllegalStateException("no batch given");
      }
      if (starts[starts.length - 1] != rows) {
        throw new IllegalStateException(
            "batches end at row " + starts[starts.length - 1] + " of " + rows);
      }
      return new RowNumbering(starts);
    }
  }
}
