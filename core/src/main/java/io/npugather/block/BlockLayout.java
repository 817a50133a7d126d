package io.npugather.block;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.arrow.vector.ipc.message.ArrowFieldNode;

/**
 * Metadata of one rank's block, and its wire format: what a receiver needs to rebuild that rank's
 * Arrow vectors over a slice of the receive buffer.
 *
 * <p>The block is the concatenation, in {@code VectorLoader} order, of every Arrow buffer of every
 * column (nested children included), each followed by zero padding up to the next multiple of 8
 * bytes. So every buffer starts 8-byte aligned inside the block, {@link #bufferOffset(int)} is
 * derived from the lengths, and {@link #blockBytes()} is a multiple of 8.
 *
 * <p>Wire format ({@link #toBytes()}): version byte {@value #VERSION}, schema fingerprint (8 bytes,
 * big endian), then unsigned LEB128 varints: row count, node count, (length, null count) per node,
 * buffer count, length per buffer, variadic-count count, each variadic count. Nothing may follow.
 * {@link #fromBytes(byte[])} rejects anything else with an {@link IllegalArgumentException}.
 *
 * <p>Instances are immutable.
 */
public final class BlockLayout {
  /** The format version written by {@link #toBytes()}. */
  public static final byte VERSION = 1;

  /** Upper bound on the node and buffer counts accepted from the wire. */
  static final int MAX_ENTRIES = 1 << 24;

  private final long schemaFingerprint;
  private final long rowCount;
  private final long[] nodeLengths;
  private final long[] nodeNullCounts;
  private final long[] bufferLengths;
  private final long[] bufferOffsets;
  private final long[] variadicBufferCounts;
  private final long blockBytes;

  /**
   * @param schemaFingerprint {@link SchemaFingerprint#of} of the Arrow schema the block was written
   *     with
   * @param rowCount rows in the block
   * @param nodeLengths per Arrow field node (VectorLoader order): its value count
   * @param nodeNullCounts per Arrow field node: its null count
   * @param bufferLengths per Arrow buffer (VectorLoader order): its length in bytes, without
   *     padding
   * @param variadicBufferCounts per view-type vector (none for Spark's mapping): its data buffer
   *     count
   */
  public BlockLayout(
      long schemaFingerprint,
      long rowCount,
      long[] nodeLengths,
      long[] nodeNullCounts,
      long[] bufferLengths,
      long[] variadicBufferCounts) {
    if (rowCount < 0) {
      throw new IllegalArgumentException("rowCount must be >= 0, got " + rowCount);
    }
    if (nodeLengths.length != nodeNullCounts.length) {
      throw new IllegalArgumentException(
          "nodeLengths and nodeNullCounts differ in length: "
              + nodeLengths.length
              + " vs "
              + nodeNullCounts.length);
    }
    for (int i = 0; i < nodeLengths.length; i++) {
      if (nodeLengths[i] < 0 || nodeLengths[i] > Integer.MAX_VALUE) {
        throw new IllegalArgumentException(
            "node " + i + ": length must be in [0, 2^31-1], got " + nodeLengths[i]);
      }
      if (nodeNullCounts[i] < 0 || nodeNullCounts[i] > nodeLengths[i]) {
        throw new IllegalArgumentException(
            "node "
                + i
                + ": null count must be in [0, length="
                + nodeLengths[i]
                + "], got "
                + nodeNullCounts[i]);
      }
    }
    for (int i = 0; i < variadicBufferCounts.length; i++) {
      if (variadicBufferCounts[i] < 0) {
        throw new IllegalArgumentException(
            "variadic buffer count " + i + " must be >= 0, got " + variadicBufferCounts[i]);
      }
    }
    this.schemaFingerprint = schemaFingerprint;
    this.rowCount = rowCount;
    this.nodeLengths = nodeLengths.clone();
    this.nodeNullCounts = nodeNullCounts.clone();
    this.bufferLengths = bufferLengths.clone();
    this.variadicBufferCounts = variadicBufferCounts.clone();
    this.bufferOffsets = new long[bufferLengths.length];
    long offset = 0;
    for (int i = 0; i < bufferLengths.length; i++) {
      long len = bufferLengths[i];
      if (len < 0) {
        throw new IllegalArgumentException("buffer " + i + ": length must be >= 0, got " + len);
      }
      bufferOffsets[i] = offset;
      long padded = align8(len);
      if (padded < 0 || offset > Long.MAX_VALUE - padded) {
        throw new IllegalArgumentException("block size overflows at buffer " + i);
      }
      offset += padded;
    }
    this.blockBytes = offset;
  }

  /** {@code n} rounded up to a multiple of 8 (negative on overflow). */
  public static long align8(long n) {
    return (n + 7) & ~7L;
  }

  /** Stable hash of the schema the block was written with (see {@link SchemaFingerprint#of}). */
  public long schemaFingerprint() {
    return schemaFingerprint;
  }

  public long rowCount() {
    return rowCount;
  }

  /** Bytes of the block: every buffer padded to a multiple of 8. Always a multiple of 8. */
  public long blockBytes() {
    return blockBytes;
  }

  public int nodeCount() {
    return nodeLengths.length;
  }

  public long nodeLength(int node) {
    return nodeLengths[node];
  }

  public long nodeNullCount(int node) {
    return nodeNullCounts[node];
  }

  public int bufferCount() {
    return bufferLengths.length;
  }

  /** Length of buffer {@code i} in bytes, without its padding. */
  public long bufferLength(int i) {
    return bufferLengths[i];
  }

  /** Offset of buffer {@code i} from the start of the block; a multiple of 8. */
  public long bufferOffset(int i) {
    return bufferOffsets[i];
  }

  /** Data buffer counts of view-type vectors in VectorLoader order (empty for Spark's types). */
  public long[] variadicBufferCounts() {
    return variadicBufferCounts.clone();
  }

  /** The nodes as Arrow's record batches hold them. */
  List<ArrowFieldNode> nodes() {
    List<ArrowFieldNode> nodes = new ArrayList<>(nodeLengths.length);
    for (int i = 0; i < nodeLengths.length; i++) {
      nodes.add(new ArrowFieldNode(nodeLengths[i], nodeNullCounts[i]));
    }
    return nodes;
  }

  /** {@link #variadicBufferCounts()} as Arrow's record batches hold them. */
  List<Long> variadicBufferCountList() {
    List<Long> counts = new ArrayList<>(variadicBufferCounts.length);
    for (long c : variadicBufferCounts) {
      counts.add(c);
    }
    return counts;
  }

  // ---------------------------------------------------------------- wire format

  /** Serializes this layout (see the class comment for the format). */
  public byte[] toBytes() {
    ByteArrayOutputStream out =
        new ByteArrayOutputStream(16 + 4 * nodeLengths.length + 3 * bufferLengths.length);
    out.write(VERSION);
    for (int i = 7; i >= 0; i--) {
      out.write((int) (schemaFingerprint >>> (8 * i)) & 0xFF);
    }
    writeVarLong(out, rowCount);
    writeVarLong(out, nodeLengths.length);
    for (int i = 0; i < nodeLengths.length; i++) {
      writeVarLong(out, nodeLengths[i]);
      writeVarLong(out, nodeNullCounts[i]);
    }
    writeVarLong(out, bufferLengths.length);
    for (long len : bufferLengths) {
      writeVarLong(out, len);
    }
    writeVarLong(out, variadicBufferCounts.length);
    for (long c : variadicBufferCounts) {
      writeVarLong(out, c);
    }
    return out.toByteArray();
  }

  /**
   * Parses {@link #toBytes()} output. Rejects a null or truncated array, an unknown version, a
   * malformed or out-of-range number, inconsistent counts and trailing bytes, each with an {@link
   * IllegalArgumentException} naming what is wrong.
   */
  public static BlockLayout fromBytes(byte[] bytes) {
    if (bytes == null) {
      throw new IllegalArgumentException("partition layout: bytes are null");
    }
    Reader in = new Reader(bytes);
    int version = in.u8("version");
    if (version != VERSION) {
      throw new IllegalArgumentException(
          "partition layout: unsupported version " + version + " (expected " + VERSION + ")");
    }
    long fp = 0;
    for (int i = 0; i < 8; i++) {
      fp = (fp << 8) | in.u8("schema fingerprint");
    }
    long rows = in.varLong("row count");
    int nodeCount = in.count("node count", 2);
    long[] lengths = new long[nodeCount];
    long[] nulls = new long[nodeCount];
    for (int i = 0; i < nodeCount; i++) {
      lengths[i] = in.varLong("node " + i + " length");
      nulls[i] = in.varLong("node " + i + " null count");
    }
    int bufferCount = in.count("buffer count", 1);
    long[] buffers = new long[bufferCount];
    for (int i = 0; i < bufferCount; i++) {
      buffers[i] = in.varLong("buffer " + i + " length");
    }
    int variadicCount = in.count("variadic buffer count", 1);
    long[] variadic = new long[variadicCount];
    for (int i = 0; i < variadicCount; i++) {
      variadic[i] = in.varLong("variadic buffer count " + i);
    }
    if (in.pos != bytes.length) {
      throw new IllegalArgumentException(
          "partition layout: "
              + (bytes.length - in.pos)
              + " trailing byte(s) after position "
              + in.pos
              + " of "
              + bytes.length);
    }
    try {
      return new BlockLayout(fp, rows, lengths, nulls, buffers, variadic);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("partition layout: " + e.getMessage(), e);
    }
  }

  private static void writeVarLong(ByteArrayOutputStream out, long v) {
    while ((v & ~0x7FL) != 0) {
      out.write((int) ((v & 0x7F) | 0x80));
      v >>>= 7;
    }
    out.write((int) v);
  }

  private static final class Reader {
    final byte[] b;
    int pos;

    Reader(byte[] b) {
      this.b = b;
    }

    int u8(String what) {
      if (pos >= b.length) {
        throw truncated(what);
      }
      return b[pos++] & 0xFF;
    }

    IllegalArgumentException truncated(String what) {
      return new IllegalArgumentException(
          "partition layout: truncated at byte " + pos + " of " + b.length + " reading " + what);
    }

    /** A non-negative varint of at most 63 bits in its shortest encoding. */
    long varLong(String what) {
      long v = 0;
      int start = pos;
      for (int shift = 0; ; shift += 7) {
        if (shift == 63) {
          throw new IllegalArgumentException(
              "partition layout: " + what + " at byte " + start + " exceeds 2^63-1");
        }
        int x = u8(what);
        v |= (long) (x & 0x7F) << shift;
        if ((x & 0x80) == 0) {
          if (x == 0 && shift > 0) {
            throw new IllegalArgumentException(
                "partition layout: " + what + " at byte " + start + " is not minimally encoded");
          }
          return v;
        }
      }
    }

    /** A count whose entries take at least {@code minBytesEach} bytes of what remains. */
    int count(String what, int minBytesEach) {
      long n = varLong(what);
      long remaining = b.length - pos;
      if (n > MAX_ENTRIES || n * minBytesEach > remaining) {
        throw new IllegalArgumentException(
            "partition layout: "
                + what
                + " "
                + n
                + " does not fit the "
                + remaining
                + " remaining byte(s)");
      }
      return (int) n;
    }
  }

  // ---------------------------------------------------------------- Object

  @Override
  public boolean equals(Object o) {
    if (this == o) {
      return true;
    }
    if (!(o instanceof BlockLayout)) {
      return false;
    }
    BlockLayout other = (BlockLayout) o;
    return schemaFingerprint == other.schemaFingerprint
        && rowCount == other.rowCount
        && Arrays.equals(nodeLengths, other.nodeLengths)
        && Arrays.equals(nodeNullCounts, other.nodeNullCounts)
        && Arrays.equals(bufferLengths, other.bufferLengths)
        && Arrays.equals(variadicBufferCounts, other.variadicBufferCounts);
  }

  @Override
  public int hashCode() {
    int h = Long.hashCode(schemaFingerprint);
    h = 31 * h + Long.hashCode(rowCount);
    h = 31 * h + Arrays.hashCode(nodeLengths);
    h = 31 * h + Arrays.hashCode(nodeNullCounts);
    h = 31 * h + Arrays.hashCode(bufferLengths);
    return 31 * h + Arrays.hashCode(variadicBufferCounts);
  }

  @Override
  public String toString() {
    return "BlockLayout{fingerprint="
        + Long.toHexString(schemaFingerprint)
        + ", rows="
        + rowCount
        + ", nodes="
        + nodeLengths.length
        + ", buffers="
        + bufferLengths.length
        + ", blockBytes="
        + blockBytes
        + "}";
  }
}
