package io.npugather.spark.output;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.function.ToIntFunction;
import org.apache.spark.unsafe.Platform;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Every row found by its key's bytes, in order, against a map of the same rows: keys of several
 * lengths, equal hashes of different keys, null keys and empty batches.
 */
@Timeout(60)
class KeyRowIndexTest {

  @Test
  void everyRowIsFoundByItsKeyInOrder() {
    Random random = new Random(21);
    for (int run = 0; run < 20; run++) {
      checked(batches(random, 1 + random.nextInt(300)), Arrays::hashCode, random);
    }
  }

  @Test
  void keysWithTheSameHashAreToldApartByTheirBytes() {
    Random random = new Random(22);
    for (int run = 0; run < 10; run++) {
      checked(batches(random, 1 + random.nextInt(300)), key -> key.length % 3, random);
    }
    checked(batches(random, 50), key -> 7, random);
  }

  @Test
  void onlyNullKeysOrNoRowsFindNothing() {
    List<List<byte[]>> nulls = new ArrayList<>();
    nulls.add(List.of());
    nulls.add(Arrays.asList(null, null));
    KeyRowIndex index = checked(nulls, Arrays::hashCode, null);
    assertTrue(index.keyIsUnique());
    assertFalse(index.keySlots().hasNext());
  }

  @Test
  void aBuilderRefusesMoreRowsThanItCanNumberAndMissingRows() {
    assertThrows(
        IllegalArgumentException.class, () -> KeyRowIndex.builder(RowNumbering.MAX_ROWS + 1L));
    KeyRowIndex.Builder short1 = KeyRowIndex.builder(2);
    short1.addNull();
    short1.endBatch();
    assertThrows(IllegalStateException.class, short1::build);
  }

  /** Batches of rows whose keys are 8 to 32 bytes drawn from {@code distinct}, one in nine null. */
  private static List<List<byte[]>> batches(Random random, int distinct) {
    List<byte[]> pool = new ArrayList<>();
    for (int i = 0; i < distinct; i++) {
      byte[] key = new byte[8 * (1 + random.nextInt(4))];
      random.nextBytes(key);
      pool.add(key);
    }
    pool.add(ByteBuffer.allocate(16).putLong(8, 1).array()); // the same bytes, longer:
    pool.add(ByteBuffer.allocate(8).putLong(0, 0).array()); // not the same key
    List<List<byte[]>> batches = new ArrayList<>();
    for (int b = 0; b < 1 + random.nextInt(6); b++) {
      List<byte[]> rows = new ArrayList<>();
      int n = random.nextInt(4) == 0 ? 0 : random.nextInt(2000);
      for (int i = 0; i < n; i++) {
        rows.add(random.nextInt(9) == 0 ? null : pool.get(random.nextInt(pool.size())).clone());
      }
      batches.add(rows);
    }
    return batches;
  }

  /** The index of {@code batches}, checked against a map of their rows by key. */
  private static KeyRowIndex checked(
      List<List<byte[]>> batches, ToIntFunction<byte[]> hash, Random random) {
    int total = batches.stream().mapToInt(List::size).sum();
    KeyRowIndex.Builder builder = KeyRowIndex.builder(total);
    Map<ByteBuffer, List<Integer>> rowsByKey = new LinkedHashMap<>();
    int row = 0;
    for (List<byte[]> keys : batches) {
      for (byte[] key : keys) {
        if (key == null) {
          builder.addNull();
        } else {
          builder.add(key, Platform.BYTE_ARRAY_OFFSET, key.length, hash.applyAsInt(key));
          rowsByKey.computeIfAbsent(ByteBuffer.wrap(key), k -> new ArrayList<>()).add(row);
        }
        row++;
      }
      builder.endBatch();
    }
    KeyRowIndex index = builder.build();

    for (Map.Entry<ByteBuffer, List<Integer>> e : rowsByKey.entrySet()) {
      byte[] key = e.getKey().array().clone(); // other bytes than the ones given
      List<Integer> found = new ArrayList<>();
      int first = index.first(key, Platform.BYTE_ARRAY_OFFSET, key.length, hash.applyAsInt(key));
      for (int r = first; r >= 0; r = index.next(r)) {
        found.add(r);
      }
      assertEquals(e.getValue(), found, "rows of key " + Arrays.toString(key));
    }
    if (random != null) {
      for (int i = 0; i < 200; i++) {
        byte[] absent = new byte[8 * (1 + random.nextInt(4))];
        random.nextBytes(absent);
        if (!rowsByKey.containsKey(ByteBuffer.wrap(absent))) {
          int h = hash.applyAsInt(absent);
          assertEquals(-1, index.first(absent, Platform.BYTE_ARRAY_OFFSET, absent.length, h));
        }
      }
    }
    Set<ByteBuffer> keys = new HashSet<>();
    index
        .keySlots()
        .forEachRemaining(
            (int slot) -> {
              byte[] key = new byte[index.keyLength(slot)];
              Platform.copyMemory(
                  index.keyBase(),
                  index.keyOffset(slot),
                  key,
                  Platform.BYTE_ARRAY_OFFSET,
                  key.length);
              assertTrue(keys.add(ByteBuffer.wrap(key)), "key twice: " + Arrays.toString(key));
            });
    assertEquals(rowsByKey.keySet(), keys);
    boolean unique = rowsByKey.values().stream().allMatch(rows -> rows.size() == 1);
    assertEquals(unique, index.keyIsUnique());
    return index;
  }
}
