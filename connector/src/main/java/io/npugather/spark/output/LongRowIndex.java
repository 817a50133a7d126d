package io.npugather.spark.output;

import java.util.Arrays;
import java.util.BitSet;
import java.util.PrimitiveIterator;

/**
 * The rows of a gathered output by a long key. Dense (an array over the key range) when the keys
 * lie close together, as Spark's own relation turns dense; otherwise an open-addressing table at
 * most half full.
 */
public final class LongRowIndex extends RowIndex {
  private final int[] firsts; // by slot: the first row of its key, or NONE
  private final long[] slotKeys; // by slot: its key; null when dense (the slot is key - minKey)
  private final long minKey;
  private final int mask;

  private LongRowIndex(Builder b) {
    super(b.batches.build(b.rows), new int[b.rows], b.keyedRows);
    long range = b.maxKey - b.minKey; // negative when it overflows
    boolean dense =
        b.keyedRows > 0
            && range >= 0
            && range < Math.max(4L * b.keyedRows, 1024)
            && range < 1 << 30;
    minKey = b.minKey;
    if (dense) {
      firsts = new int[(int) range + 1];
      slotKeys = null;
      mask = 0;
    } else {
      int capacity = Integer.highestOneBit(Math.max(2 * b.keyedRows, 16) - 1) << 1;
      firsts = new int[capacity];
      slotKeys = new long[capacity];
      mask = capacity - 1;
    }
    Arrays.fill(firsts, NONE);
    int keys = 0;
    // Backwards, so that every chain runs forwards.
    for (int row = b.rows - 1; row >= 0; row--) {
      if (b.nulls.get(row)) {
        next[row] = NONE;
        continue;
      }
      long key = b.keys[row];
      int slot = dense ? (int) (key - minKey) : insertSlot(key);
      if (firsts[slot] == NONE) {
        keys++;
      }
      next[row] = firsts[slot];
      firsts[slot] = row;
    }
    keyCount = keys;
  }

  /** An index of {@code rows} rows, given batch by batch. */
  public static Builder builder(long rows) {
    return new Builder(RowNumbering.checkedRows(rows));
  }

  /** The first row of {@code key}, or -1 when no row has it. */
  public int first(long key) {
    if (slotKeys == null) {
      long slot = key - minKey; // as unsigned: below firsts.length only when key is in range
      return Long.compareUnsigned(slot, firsts.length) < 0 ? firsts[(int) slot] : NONE;
    }
    for (int slot = firstSlot(key, mask); ; slot = (slot + 1) & mask) {
      int row = firsts[slot];
      if (row == NONE || slotKeys[slot] == key) {
        return row;
      }
    }
  }

  /** Every key once, in no particular order. */
  public PrimitiveIterator.OfLong keys() {
    PrimitiveIterator.OfInt slots = slotsWithKeys();
    return new PrimitiveIterator.OfLong() {
      @Override
      public boolean hasNext() {
        return slots.hasNext();
      }

      @Override
      public long nextLong() {
        int slot = slots.nextInt();
        return slotKeys == null ? minKey + slot : slotKeys[slot];
      }
    };
  }

  @Override
  int slots() {
    return firsts.length;
  }

  @Override
  boolean holdsKey(int slot) {
    return firsts[slot] != NONE;
  }

  @Override
  public long bytes() {
    return super.bytes() + 4L * firsts.length + (slotKeys == null ? 0 : 8L * slotKeys.length);
  }

  /** Where an absent key would go, or the slot of a present one. */
  private int insertSlot(long key) {
    int slot = firstSlot(key, mask);
    while (firsts[slot] != NONE && slotKeys[slot] != key) {
      slot = (slot + 1) & mask;
    }
    slotKeys[slot] = key;
    return slot;
  }

  @Override
  public String toString() {
    return (slotKeys == null ? "dense, " : "hashed, ") + super.toString();
  }

  /** The keys of the rows, batch after batch. */
  public static final class Builder {
    private final long[] keys;
    private final BitSet nulls = new BitSet();
    private final RowNumbering.Builder batches = new RowNumbering.Builder();
    private int rows;
    private int keyedRows;
    private long minKey = Long.MAX_VALUE;
    private long maxKey = Long.MIN_VALUE;

    private Builder(int rows) {
      this.keys = new long[rows];
    }

    /** The next row's key. */
    public void add(long key) {
      keys[rows++] = key;
      keyedRows++;
      minKey = Math.min(minKey, key);
      maxKey = Math.max(maxKey, key);
    }

    /** The next row, whose key is null: no key leads to it. */
    public void addNull() {
      nulls.set(rows++);
    }

    /** The current batch ends (after its last row, if any). */
    public void endBatch() {
      batches.endBatch(rows);
    }

    /** The index; every row announced to {@link #builder} given. */
    public LongRowIndex build() {
      if (rows != keys.length) {
        throw new IllegalStateException(rows + " of " + keys.length + " rows given");
      }
      return new LongRowIndex(this);
    }
  }
}
