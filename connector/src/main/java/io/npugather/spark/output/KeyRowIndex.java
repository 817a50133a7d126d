package io.npugather.spark.output;

import java.util.Arrays;
import java.util.PrimitiveIterator;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.array.ByteArrayMethods;

/**
 * The rows of a gathered output by a key of any type, given as its bytes (an {@code UnsafeRow} of
 * the key columns, which are equal exactly when the keys are, as Spark's own relation compares
 * them) and their hash. Each distinct key is kept once, in an array of key bytes; an
 * open-addressing table at most half full leads from it to the first of its rows, and every row to
 * the next of its key, in the order given. A slot is two adjacent longs (the hash and first row,
 * then where the key's bytes are), so that a probe reads one cache line of the table. Immutable
 * once built: tasks in several threads read one index.
 */
public final class KeyRowIndex extends RowIndex {
  private static final int MAX_KEY_BYTES = Integer.MAX_VALUE - 16;

  // Slot s: table[2s] = hash << 32 | (first row + 1), 0 when empty;
  // table[2s + 1] = offset of the key's bytes in keyBytes << 32 | their length.
  private final long[] table;
  private final byte[] keyBytes;
  private final int mask;

  private KeyRowIndex(Builder b) {
    super(b.batches.build(b.rows), b.next, b.keyedRows);
    table = b.table;
    keyBytes = b.keyBytes;
    mask = b.mask;
    keyCount = b.keyCount;
  }

  /** An index of {@code rows} rows, given batch by batch. */
  public static Builder builder(long rows) {
    return new Builder(RowNumbering.checkedRows(rows));
  }

  /**
   * The first row of the key whose bytes are {@code length} bytes at {@code offset} of {@code base}
   * (as {@link Platform} addresses them) and whose hash is {@code hash}, or -1.
   */
  public int first(Object base, long offset, int length, int hash) {
    return (int) table[2 * slotOf(table, keyBytes, mask, base, offset, length, hash)] - 1;
  }

  /** The slot of a key in {@code table}, or the empty one where it would go. */
  private static int slotOf(
      long[] table, byte[] keyBytes, int mask, Object base, long offset, int length, int hash) {
    for (int slot = firstSlot(hash, mask); ; slot = (slot + 1) & mask) {
      long head = table[2 * slot];
      if (head == 0) {
        return slot;
      }
      if ((int) (head >>> 32) == hash) {
        long at = table[2 * slot + 1];
        if ((int) at == length
            && ByteArrayMethods.arrayEquals(
                keyBytes, Platform.BYTE_ARRAY_OFFSET + (at >>> 32), base, offset, length)) {
          return slot;
        }
      }
    }
  }

  /** The slot of every key once, in no particular order: its bytes by {@link #keyOffset}. */
  public PrimitiveIterator.OfInt keySlots() {
    return slotsWithKeys();
  }

  @Override
  int slots() {
    return mask + 1;
  }

  @Override
  boolean holdsKey(int slot) {
    return table[2 * slot] != 0;
  }

  /** The array that holds the keys' bytes. */
  public Object keyBase() {
    return keyBytes;
  }

  /** Where the bytes of the key in {@code slot} start, as {@link Platform} addresses them. */
  public long keyOffset(int slot) {
    return Platform.BYTE_ARRAY_OFFSET + (table[2 * slot + 1] >>> 32);
  }

  /** The number of bytes of the key in {@code slot}. */
  public int keyLength(int slot) {
    return (int) table[2 * slot + 1];
  }

  @Override
  public long bytes() {
    return super.bytes() + 8L * table.length + keyBytes.length;
  }

  @Override
  public String toString() {
    return super.toString() + ", " + keyBytes.length + " bytes of keys";
  }

  /** The keys of the rows, batch after batch. */
  public static final class Builder {
    private final RowNumbering.Builder batches = new RowNumbering.Builder();
    private final long[] table;
    private final int[] lasts; // by slot: the last row of its key so far
    private final int mask;
    private final int[] next;
    private byte[] keyBytes = new byte[1024];
    private int keyBytesUsed;
    private int rows;
    private int keyCount;
    private int keyedRows;

    private Builder(int rows) {
      int capacity = Integer.highestOneBit(Math.max(2 * rows, 16) - 1) << 1;
      table = new long[2 * capacity];
      lasts = new int[capacity];
      mask = capacity - 1;
      next = new int[rows];
    }

    /**
     * The next row's key: {@code length} bytes at {@code offset} of {@code base}, hashing to {@code
     * hash}.
     */
    public void add(Object base, long offset, int length, int hash) {
      int row = rows++;
      next[row] = NONE;
      keyedRows++;
      int slot = slotOf(table, keyBytes, mask, base, offset, length, hash);
      if (table[2 * slot] != 0) { // a key seen before
        next[lasts[slot]] = row;
        lasts[slot] = row;
        return;
      }
      table[2 * slot] = (long) hash << 32 | (row + 1L);
      table[2 * slot + 1] = (long) keep(base, offset, length) << 32 | length;
      lasts[slot] = row;
      keyCount++;
    }

    /** The next row, whose key is null: no key leads to it. */
    public void addNull() {
      next[rows++] = NONE;
    }

    /** The current batch ends (after its last row, if any). */
    public void endBatch() {
      batches.endBatch(rows);
    }

    /** The index; every row announced to {@link #builder} given. */
    public KeyRowIndex build() {
      if (rows != next.length) {
        throw new IllegalStateException(rows + " of " + next.length + " rows given");
      }
      keyBytes = Arrays.copyOf(keyBytes, keyBytesUsed);
      return new KeyRowIndex(this);
    }

    /** Copies a new key's bytes to the end of the key array; where they start. */
    private int keep(Object base, long offset, int length) {
      if (length > MAX_KEY_BYTES - keyBytesUsed) {
        throw new IllegalArgumentException(
            "the distinct keys of a gathered build side take more than "
                + MAX_KEY_BYTES
                + " bytes, the most one index holds");
      }
      if (keyBytesUsed + length > keyBytes.length) {
        long grown = Math.max((long) keyBytes.length * 2, (long) keyBytesUsed + length);
        keyBytes = Arrays.copyOf(keyBytes, (int) Math.min(grown, MAX_KEY_BYTES));
      }
      int at = keyBytesUsed;
      Platform.copyMemory(base, offset, keyBytes, Platform.BYTE_ARRAY_OFFSET + at, length);
      keyBytesUsed += length;
      return at;
    }
  }
}
