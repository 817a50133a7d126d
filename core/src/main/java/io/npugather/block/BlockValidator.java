package io.npugather.block;

import io.npugather.NpuGatherException;
import io.npugather.ResultCode;
import java.util.List;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.vector.BufferLayout;
import org.apache.arrow.vector.TypeLayout;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * Cheap consistency checks of a received block against its layout before vectors are built over it:
 * every buffer is long enough for its node's value count, offsets buffers have their {@code length
 * + 1} entries with first and last offsets inside the data or child they index. Reads two offsets
 * per variable-width vector, nothing per row. Catches a wrong displacement or a truncated block
 * with a clear error instead of reads past the block.
 */
final class BlockValidator {
  private final BlockLayout layout;
  private final ArrowBuf recv;
  private final long displ;
  private final int rank;
  private final int ownRank;
  private int node;
  private int buffer;

  private BlockValidator(BlockLayout layout, ArrowBuf recv, long displ, int rank, int ownRank) {
    this.layout = layout;
    this.recv = recv;
    this.displ = displ;
    this.rank = rank;
    this.ownRank = ownRank;
  }

  /**
   * Checks rank {@code rank}'s block at {@code displ} of {@code recv} (null if it is empty), as
   * received by {@code ownRank}.
   *
   * @throws NpuGatherException ({@link ResultCode#REMOTE_ERROR}: the sender's) if it is
   *     inconsistent
   */
  static void check(
      Schema schema, BlockLayout layout, ArrowBuf recv, long displ, int rank, int ownRank) {
    BlockValidator v = new BlockValidator(layout, recv, displ, rank, ownRank);
    for (Field f : schema.getFields()) {
      v.field(f, f.getName(), layout.rowCount());
    }
  }

  private void field(Field f, String path, long minLength) {
    int n = node++;
    long length = layout.nodeLength(n);
    if (length < minLength) {
      fail(path, "has " + length + " values, its parent needs at least " + minLength);
    }
    ArrowType type = f.getType();
    List<BufferLayout> buffers = TypeLayout.getTypeLayout(type).getBufferLayouts();
    long first = 0;
    long last = 0;
    boolean hasOffsets = false;
    for (BufferLayout b : buffers) {
      int i = buffer++;
      long len = layout.bufferLength(i);
      switch (b.getType()) {
        case VALIDITY:
          long nulls = layout.nodeNullCount(n);
          // Arrow synthesizes a missing bitmap only for all-valid or all-null vectors.
          boolean synthesized = len == 0 && (nulls == 0 || nulls == length);
          if (!synthesized && len < (length + 7) / 8) {
            fail(path, "validity buffer of " + len + " bytes for " + length + " values");
          }
          break;
        case OFFSET:
          hasOffsets = true;
          int width = b.getTypeBitWidth() / 8;
          if (length == 0) {
            break; // Arrow may leave the offsets of an empty vector empty.
          }
          if (len < (length + 1) * width) {
            fail(path, "offsets buffer of " + len + " bytes for " + length + " values");
          }
          long at = displ + layout.bufferOffset(i);
          first = width == 4 ? recv.getInt(at) : recv.getLong(at);
          last = width == 4 ? recv.getInt(at + length * 4) : recv.getLong(at + length * 8);
          if (first < 0 || last < first) {
            fail(path, "offsets run from " + first + " to " + last);
          }
          break;
        case DATA:
          long needed = hasOffsets ? last : (length * b.getTypeBitWidth() + 7) / 8;
          if (len < needed) {
            fail(path, "data buffer of " + len + " bytes, " + needed + " needed");
          }
          break;
        default:
          break;
      }
    }
    long childLength = length;
    if (type instanceof ArrowType.List
        || type instanceof ArrowType.LargeList
        || type instanceof ArrowType.Map) {
      childLength = last;
    } else if (type instanceof ArrowType.FixedSizeList) {
      childLength = length * ((ArrowType.FixedSizeList) type).getListSize();
    }
    for (Field c : f.getChildren()) {
      field(c, path + "." + c.getName(), childLength);
    }
  }

  private void fail(String path, String what) {
    throw new NpuGatherException(
        ResultCode.REMOTE_ERROR,
        ReceivedBlocks.OPERATION,
        ownRank,
        "block of rank " + rank + " is inconsistent with its layout: column " + path + " " + what);
  }
}
