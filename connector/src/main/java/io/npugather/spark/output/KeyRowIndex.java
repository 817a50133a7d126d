package io.npugather.spark.output;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.PrimitiveIterator;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Executor;
import java.util.function.IntConsumer;
import java.util.function.Supplier;
import java.util.stream.IntStream;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.array.ByteArrayMethods;

/**
 * The rows of a gathered output by a key of any type, given as its bytes (an {@code UnsafeRow} of
 * the key columns, which are equal exactly when the keys are, as Spark's own relation compares
 * them) and their hash. Each distinct key is kept once, in an array of key bytes; an
 * open-addressing table at most half full leads from it to the first of its rows, and every row to
 * the next of its key, in the order given. A slot is two adjacent longs (the hash and first row,
 * then where the key's bytes are), so that a probe reads one cache line of the table. Built by
 * several threads at once ({@link #build}); immutable once built: tasks in several threads read one
 * index.
 */
public final class KeyRowIndex extends RowIndex {
  private static final int MAX_KEY_BYTES = Integer.MAX_VALUE - 16;

  // Slot s: table[2s] = hash << 32 | (first row + 1), 0 when empty;
  // table[2s + 1] = offset of the key's bytes in keyBytes << 32 | their length.
  private final long[] table;
  private final byte[] keyBytes;
  private final int mask;

  private KeyRowIndex(
      RowNumbering numbering,
      int[] next,
      int keyedRows,
      long[] table,
      byte[] keyBytes,
      int keyCount) {
    super(numbering, next, keyedRows);
    this.table = table;
    this.keyBytes = keyBytes;
    this.mask = table.length / 2 - 1;
    this.keyCount = keyCount;
  }

  /** An index of {@code rows} rows, given batch by batch. */
  public static Builder builder(long rows) {
    return new Builder(RowNumbering.checkedRows(rows));
  }

  /** The key of a row by its number, read by one thread: each thread reads through its own. */
  public interface Keys {
    /** Reads {@code row}'s key; false when it is null (the accessors then mean nothing). */
    boolean read(int row);

    /** The key's bytes: {@link #length} of them at {@link #offset} of {@link #base}. */
    Object base();

    long offset();

    int length();

    /** The key's hash. */
    int hash();
  }

  /**
   * The index of the rows {@code numbering} numbers, their keys read by {@code keys} (one {@link
   * Keys} per thread), built by up to {@code threads} threads: the caller's, and the others' work
   * run on {@code pool}. The same index whatever the number of threads: the table is split into as
   * many ranges of slots, each filled by one thread with the keys whose first slot lies in it, in
   * row order; the few keys whose search runs past the end of their range are inserted after that,
   * by the caller, also in row order. A key's rows all take the same path (a search from the same
   * slot, over a table that only fills), so each key's chain keeps the rows' order.
   */
  public static KeyRowIndex build(
      RowNumbering numbering, Supplier<Keys> keys, int threads, Executor pool) {
    int rows = numbering.rows();
    int capacity = Integer.highestOneBit(Math.max(2 * rows, 16) - 1) << 1;
    int parts = Math.max(1, Math.min(threads, capacity / MIN_RANGE_SLOTS));
    int range = capacity / parts; // the last range also takes what the division leaves
    long[] table = new long[2 * capacity];
    int[] lasts = new int[capacity];
    int[] next = new int[rows];
    Arrays.fill(next, NONE);
    int[] hashes = new int[rows];
    boolean[] nulls = new boolean[rows];
    int mask = capacity - 1;

    // The hashes first, each thread over a run of rows: every thread then knows which are its own.
    inParallel(
        parts,
        pool,
        p -> {
          Keys k = keys.get();
          for (int row = (int) ((long) rows * p / parts),
                  end = (int) ((long) rows * (p + 1) / parts);
              row < end;
              row++) {
            if (k.read(row)) {
              hashes[row] = k.hash();
            } else {
              nulls[row] = true;
            }
          }
        });

    // Each range of slots filled by its thread, with key bytes of its own.
    Range[] ranges = new Range[parts];
    inParallel(
        parts,
        pool,
        p -> {
          Keys k = keys.get();
          Range mine = new Range(p * range, p == parts - 1 ? capacity : (p + 1) * range);
          for (int row = 0; row < rows; row++) {
            if (nulls[row]) {
              continue;
            }
            int home = firstSlot(hashes[row], mask);
            if (home < mine.from || home >= mine.to) {
              continue;
            }
            k.read(row);
            int slot =
                slotIn(
                    table,
                    mine.keyBytes,
                    home,
                    mine.to,
                    k.base(),
                    k.offset(),
                    k.length(),
                    hashes[row]);
            if (slot < 0) {
              mine.deferred.add(row); // its search left the range: after the ranges
            } else {
              mine.insert(table, lasts, next, slot, row, k, hashes[row]);
            }
          }
          ranges[p] = mine;
        });

    // One array of key bytes, the ranges' in turn; then the keys deferred, in row order.
    long keyBytesUsed = 0;
    for (Range r : ranges) {
      keyBytesUsed += r.used;
    }
    if (keyBytesUsed > MAX_KEY_BYTES) {
      throw tooManyKeyBytes();
    }
    Range all = new Range(0, capacity);
    all.keyBytes = new byte[(int) Math.max(keyBytesUsed, 16)];
    int keyCount = 0;
    for (Range r : ranges) {
      System.arraycopy(r.keyBytes, 0, all.keyBytes, all.used, r.used);
      for (int slot = r.from; slot < r.to; slot++) {
        if (table[2 * slot] != 0) {
          table[2 * slot + 1] += (long) all.used << 32;
        }
      }
      all.used += r.used;
      keyCount += r.keyCount;
    }
    int[] deferred = Arrays.stream(ranges).flatMapToInt(r -> r.deferred.build()).sorted().toArray();
    Keys k = keys.get();
    for (int row : deferred) {
      k.read(row);
      int slot = slotOf(table, all.keyBytes, mask, k.base(), k.offset(), k.length(), hashes[row]);
      all.insert(table, lasts, next, slot, row, k, hashes[row]);
    }
    keyCount += all.keyCount;
    int keyedRows = 0;
    for (boolean isNull : nulls) {
      keyedRows += isNull ? 0 : 1;
    }
    return new KeyRowIndex(
        numbering, next, keyedRows, table, Arrays.copyOf(all.keyBytes, all.used), keyCount);
  }

  /** The smallest range of slots one thread fills: fewer keys are not worth a thread. */
  private static final int MIN_RANGE_SLOTS = 1 << 12;

  /** The slots one thread fills, and the bytes of the keys it keeps. */
  private static final class Range {
    final int from;
    final int to;
    final IntStream.Builder deferred = IntStream.builder();
    byte[] keyBytes = new byte[1024];
    int used;
    int keyCount;

    Range(int from, int to) {
      this.from = from;
      this.to = to;
    }

    /** Row {@code row} of key {@code k} into {@code slot}: its key's slot, or the empty one. */
    void insert(long[] table, int[] lasts, int[] next, int slot, int row, Keys k, int hash) {
      if (table[2 * slot] != 0) { // a key seen before
        next[lasts[slot]] = row;
        lasts[slot] = row;
        return;
      }
      table[2 * slot] = (long) hash << 32 | (row + 1L);
      table[2 * slot + 1] = (long) keep(k.base(), k.offset(), k.length()) << 32 | k.length();
      lasts[slot] = row;
      keyCount++;
    }

    /** Copies a new key's bytes to the end of the key array; where they start. */
    private int keep(Object base, long offset, int length) {
      if (length > MAX_KEY_BYTES - used) {
        throw tooManyKeyBytes();
      }
      if (used + length > keyBytes.length) {
        long grown = Math.max((long) keyBytes.length * 2, (long) used + length);
        keyBytes = Arrays.copyOf(keyBytes, (int) Math.min(grown, MAX_KEY_BYTES));
      }
      int at = used;
      Platform.copyMemory(base, offset, keyBytes, Platform.BYTE_ARRAY_OFFSET + at, length);
      used += length;
      return at;
    }
  }

  private static IllegalArgumentException tooManyKeyBytes() {
    return new IllegalArgumentException(
        "the distinct keys of a gathered build side take more than "
            + MAX_KEY_BYTES
            + " bytes, the most one index holds");
  }

  /** {@code task} of 0 to {@code parts - 1}: 0 in this thread, the others on {@code pool}. */
  private static void inParallel(int parts, Executor pool, IntConsumer task) {
    List<CompletableFuture<Void>> others = new ArrayList<>();
    for (int p = 1; p < parts; p++) {
      int part = p;
      others.add(CompletableFuture.runAsync(() -> task.accept(part), pool));
    }
    RuntimeException failed = null;
    try {
      task.accept(0);
    } catch (RuntimeException e) {
      failed = e;
    }
    for (CompletableFuture<Void> other : others) {
      try {
        other.join(); // bounded: each part is a pass over local memory
      } catch (CompletionException e) {
        if (failed == null) {
          failed =
              e.getCause() instanceof RuntimeException cause
                  ? cause
                  : new IllegalStateException("building a key index failed", e.getCause());
        }
      }
    }
    if (failed != null) {
      throw failed;
    }
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

  /**
   * The slot of a key in {@code table} searched from {@code home} below {@code end}: the key's, or
   * the empty one where it would go; -1 when the search reaches {@code end}.
   */
  private static int slotIn(
      long[] table,
      byte[] keyBytes,
      int home,
      int end,
      Object base,
      long offset,
      int length,
      int hash) {
    for (int slot = home; slot < end; slot++) {
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
    return -1;
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

  /** The keys of the rows, batch after batch, kept until {@link #build} indexes them. */
  public static final class Builder {
    private final RowNumbering.Builder batches = new RowNumbering.Builder();
    private final int[] hashes;
    private final long[] keyAt; // by row: offset in keyBytes << 32 | length, or -1 when null
    private byte[] keyBytes = new byte[1024];
    private int keyBytesUsed;
    private int rows;

    private Builder(int rows) {
      hashes = new int[rows];
      keyAt = new long[rows];
    }

    /**
     * The next row's key: {@code length} bytes at {@code offset} of {@code base}, hashing to {@code
     * hash}.
     */
    public void add(Object base, long offset, int length, int hash) {
      if (length > MAX_KEY_BYTES - keyBytesUsed) {
        throw tooManyKeyBytes();
      }
      if (keyBytesUsed + length > keyBytes.length) {
        long grown = Math.max((long) keyBytes.length * 2, (long) keyBytesUsed + length);
        keyBytes = Arrays.copyOf(keyBytes, (int) Math.min(grown, MAX_KEY_BYTES));
      }
      Platform.copyMemory(
          base, offset, keyBytes, Platform.BYTE_ARRAY_OFFSET + keyBytesUsed, length);
      hashes[rows] = hash;
      keyAt[rows++] = (long) keyBytesUsed << 32 | length;
      keyBytesUsed += length;
    }

    /** The next row, whose key is null: no key leads to it. */
    public void addNull() {
      keyAt[rows++] = -1;
    }

    /** The current batch ends (after its last row, if any). */
    public void endBatch() {
      batches.endBatch(rows);
    }

    /** The index, built by one thread; every row announced to {@link #builder} given. */
    public KeyRowIndex build() {
      return build(1, Runnable::run);
    }

    /** The index, built by up to {@code threads} threads ({@link KeyRowIndex#build}). */
    public KeyRowIndex build(int threads, Executor pool) {
      if (rows != keyAt.length) {
        throw new IllegalStateException(rows + " of " + keyAt.length + " rows given");
      }
      RowNumbering numbering = batches.build(rows);
      return KeyRowIndex.build(
          numbering,
          () ->
              new Keys() {
                private long at;
                private int row;

                @Override
                public boolean read(int row) {
                  this.row = row;
                  at = keyAt[row];
                  return at >= 0;
                }

                @Override
                public Object base() {
                  return keyBytes;
                }

                @Override
                public long offset() {
                  return Platform.BYTE_ARRAY_OFFSET + (at >>> 32);
                }

                @Override
                public int length() {
                  return (int) at;
                }

                @Override
                public int hash() {
                  return hashes[row];
                }
              },
          threads,
          pool);
    }
  }
}
