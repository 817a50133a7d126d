package io.npugather.spark.output;

import java.util.NoSuchElementException;
import java.util.PrimitiveIterator;

/**
 * What the indexes of a gathered output's rows by key share ({@link LongRowIndex}, {@link
 * KeyRowIndex}): the rows numbered across the output's batches, each key's rows a chain from its
 * first in that order, and slots that each hold one key. Immutable once built: tasks in several
 * threads read one index.
 */
public abstract class RowIndex {
  static final int NONE = -1;

  private final RowNumbering numbering;
  final int[] next; // by row: the next row of its key, or NONE
  private final int keyedRows;
  int keyCount; // set by the subclass's constructor

  RowIndex(RowNumbering numbering, int[] next, int keyedRows) {
    this.numbering = numbering;
    this.next = next;
    this.keyedRows = keyedRows;
  }

  /** The row after {@code row} with the same key, or -1. */
  public final int next(int row) {
    return next[row];
  }

  /** Where its rows are. */
  public final RowNumbering numbering() {
    return numbering;
  }

  /** Whether no two rows have the same key (rows with a null key left out). */
  public final boolean keyIsUnique() {
    return keyCount == keyedRows;
  }

  /** The bytes of its arrays. */
  public long bytes() {
    return numbering.bytes() + 4L * next.length;
  }

  /**
   * The first slot to look at for {@code value} in a table of {@code mask + 1} slots: its bits
   * spread over the table.
   */
  static int firstSlot(long value, int mask) {
    long h = value * 0x9E3779B97F4A7C15L;
    return (int) (h ^ (h >>> 32)) & mask;
  }

  /** The number of slots. */
  abstract int slots();

  /** Whether {@code slot} holds a key. */
  abstract boolean holdsKey(int slot);

  /** The slots that hold a key, in order. */
  final PrimitiveIterator.OfInt slotsWithKeys() {
    return new PrimitiveIterator.OfInt() {
      private int slot = advance(0);

      private int advance(int from) {
        while (from < slots() && !holdsKey(from)) {
          from++;
        }
        return from;
      }

      @Override
      public boolean hasNext() {
        return slot < slots();
      }

      @Override
      public int nextInt() {
        if (!hasNext()) {
          throw new NoSuchElementException();
        }
        int at = slot;
        slot = advance(slot + 1);
        return at;
      }
    };
  }

  @Override
  public String toString() {
    return keyedRows
        + " rows with a key, "
        + keyCount
        + " keys, "
        + numbering.batches()
        + " batches";
  }
}
