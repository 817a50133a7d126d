package io.npugather.spark.output;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.function.LongSupplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Every row found by its key, in order, against a map of the same rows; both layouts. */
@Timeout(60)
class LongRowIndexTest {
  private static final Long NULL = null;

  @Test
  void keysCloseTogetherFindEveryRowInOrder() {
    Random random = new Random(11);
    for (int run = 0; run < 20; run++) {
      long base = random.nextLong() / 2;
      int spread = 1 + random.nextInt(1000);
      List<List<Long>> batches =
          batches(random, () -> base + random.nextInt(spread), 1 + random.nextInt(6));
      batches.add(List.of(base));
      LongRowIndex index = checked(batches, random);
      assertTrue(index.toString().startsWith("dense"), index.toString());
    }
  }

  @Test
  void keysFarApartFindEveryRowInOrder() {
    Random random = new Random(12);
    long[] extremes = {Long.MIN_VALUE, Long.MAX_VALUE, 0, -1, 1, Long.MIN_VALUE + 1};
    for (int run = 0; run < 20; run++) {
      List<Long> pool = new ArrayList<>();
      for (int i = 0; i < 1 + random.nextInt(500); i++) {
        pool.add(random.nextLong());
      }
      for (long e : extremes) {
        pool.add(e);
      }
      List<List<Long>> batches =
          batches(random, () -> pool.get(random.nextInt(pool.size())), 1 + random.nextInt(6));
      batches.add(List.of(Long.MIN_VALUE, Long.MAX_VALUE));
      LongRowIndex index = checked(batches, random);
      assertTrue(index.toString().startsWith("hashed"), index.toString());
    }
  }

  @Test
  void keysAtTheEndsOfTheLongsAreNotTakenForEachOther() {
    // The dense range test must hold where key - minKey overflows.
    List<List<Long>> batches = List.of(List.of(5L, 6L, 7L, 5L));
    LongRowIndex index = checked(batches, new Random(1));
    for (long absent : new long[] {Long.MIN_VALUE, Long.MAX_VALUE, 4, 8, 5 + (1L << 32)}) {
      assertEquals(-1, index.first(absent), Long.toString(absent));
    }
    checked(List.of(List.of(Long.MIN_VALUE, Long.MAX_VALUE, Long.MIN_VALUE)), new Random(2));
  }

  @Test
  void onlyNullKeysOrNoRowsFindNothing() {
    LongRowIndex nulls = checked(List.of(List.of(), java.util.Arrays.asList(NULL, NULL)), null);
    assertTrue(nulls.keyIsUnique());
    assertFalse(nulls.keys().hasNext());
    LongRowIndex.Builder none = LongRowIndex.builder(0);
    none.endBatch();
    LongRowIndex empty = none.build();
    assertEquals(-1, empty.first(0));
    assertFalse(empty.keys().hasNext());
  }

  @Test
  void aBuilderRefusesMoreRowsThanItCanNumberAndMissingRows() {
    IllegalArgumentException tooMany =
        assertThrows(
            IllegalArgumentException.class, () -> LongRowIndex.builder(RowNumbering.MAX_ROWS + 1L));
    assertTrue(tooMany.getMessage().contains(Long.toString(RowNumbering.MAX_ROWS + 1L)));
    LongRowIndex.Builder short1 = LongRowIndex.builder(2);
    short1.add(3);
    short1.endBatch();
    assertThrows(IllegalStateException.class, short1::build);
  }

  /** Batches of rows with keys from {@code keys}, about one in nine null, some batches empty. */
  private static List<List<Long>> batches(Random random, LongSupplier keys, int count) {
    List<List<Long>> batches = new ArrayList<>();
    for (int b = 0; b < count; b++) {
      List<Long> rows = new ArrayList<>();
      int n = random.nextInt(4) == 0 ? 0 : random.nextInt(2000);
      for (int i = 0; i < n; i++) {
        rows.add(random.nextInt(9) == 0 ? null : keys.getAsLong());
      }
      batches.add(rows);
    }
    return batches;
  }

  /** The index of {@code batches}, checked against a map of their rows by key. */
  private static LongRowIndex checked(List<List<Long>> batches, Random random) {
    int total = batches.stream().mapToInt(List::size).sum();
    LongRowIndex.Builder builder = LongRowIndex.builder(total);
    Map<Long, List<Integer>> rowsByKey = new LinkedHashMap<>();
    List<int[]> places = new ArrayList<>(); // row -> {batch, row in batch}
    int row = 0;
    for (int b = 0; b < batches.size(); b++) {
      List<Long> keys = batches.get(b);
      for (int i = 0; i < keys.size(); i++, row++) {
        Long key = keys.get(i);
        if (key == null) {
          builder.addNull();
        } else {
          builder.add(key);
          rowsByKey.computeIfAbsent(key, k -> new ArrayList<>()).add(row);
        }
        places.add(new int[] {b, i});
      }
      builder.endBatch();
    }
    LongRowIndex index = builder.build();

    for (Map.Entry<Long, List<Integer>> e : rowsByKey.entrySet()) {
      List<Integer> found = new ArrayList<>();
      for (int r = index.first(e.getKey()); r >= 0; r = index.next(r)) {
        found.add(r);
      }
      assertEquals(e.getValue(), found, "rows of key " + e.getKey());
    }
    for (int r = 0; r < total; r++) {
      int batch = index.numbering().batchOf(r);
      assertEquals(places.get(r)[0], batch, "batch of row " + r);
      assertEquals(places.get(r)[1], r - index.numbering().batchStart(batch), "place of row " + r);
    }
    if (random != null) {
      for (int i = 0; i < 1000; i++) {
        long absent = random.nextLong();
        if (!rowsByKey.containsKey(absent)) {
          assertEquals(-1, index.first(absent), "absent key " + absent);
        }
      }
    }
    Set<Long> keys = new HashSet<>();
    index.keys().forEachRemaining((long k) -> assertTrue(keys.add(k), "key twice: " + k));
    assertEquals(rowsByKey.keySet(), keys);
    boolean unique = rowsByKey.values().stream().allMatch(rows -> rows.size() == 1);
    assertEquals(unique, index.keyIsUnique());
    assertTrue(index.bytes() > 0);
    return index;
  }
}
