package io.npugather.bench;

/**
 * A 64-bit hash of one row (its id, then its floats' bit patterns, then its strings' bytes, in
 * order). A partition's checksum is the wrapping sum of its rows' hashes, so it does not depend on
 * the row order, and two methods that deliver the same rows give the same checksum.
 */
final class RowHash {
  private RowHash() {}

  static long start(long id) {
    return id * 0x9E3779B97F4A7C15L;
  }

  static long add(long h, float value) {
    return (h ^ Float.floatToRawIntBits(value)) * 0x100000001B3L + 0x632BE59BD9B4E019L;
  }

  static long add(long h, byte[] bytes) {
    h = (h ^ bytes.length) * 0x100000001B3L;
    for (byte b : bytes) {
      h = (h ^ (b & 0xff)) * 0x100000001B3L;
    }
    return h + 0x632BE59BD9B4E019L;
  }

  /** Murmur3's 64-bit finaliser. */
  static long finish(long h) {
    h ^= h >>> 33;
    h *= 0xff51afd7ed558ccdL;
    h ^= h >>> 33;
    h *= 0xc4ceb9fe1a85ec53L;
    return h ^ (h >>> 33);
  }
}
