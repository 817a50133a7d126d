package io.npugather;

import java.util.SplittableRandom;
import org.apache.arrow.memory.ArrowBuf;

/** Reproducible random payloads: rank r's bytes follow from (seed, r) alone. */
final class TestData {
  private TestData() {}

  static byte[] bytes(long seed, int rank, int length) {
    byte[] bytes = new byte[length];
    SplittableRandom random = new SplittableRandom(seed * 1_000_003L + rank);
    for (int i = 0; i < length; i += 8) {
      long word = random.nextLong();
      for (int j = 0; j < 8 && i + j < length; j++) {
        bytes[i + j] = (byte) (word >>> (8 * j));
      }
    }
    return bytes;
  }

  static void fill(ArrowBuf buf, long offset, byte[] bytes) {
    buf.setBytes(offset, bytes, 0, bytes.length);
  }

  /**
   * Index of the first byte of {@code buf[offset, offset + expected.length)} that differs from
   * {@code expected}, or -1.
   */
  static long firstMismatch(ArrowBuf buf, long offset, byte[] expected) {
    byte[] actual = new byte[expected.length];
    buf.getBytes(offset, actual, 0, actual.length);
    return java.util.Arrays.mismatch(actual, expected);
  }
}
