package io.npugather.block;

import io.npugather.NpuGatherException;
import io.npugather.ResultCode;
import java.util.ArrayList;
import java.util.List;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.TypeLayout;
import org.apache.arrow.vector.VectorLoader;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.compression.NoCompressionCodec;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * Every peer's Arrow vectors rebuilt over slices of one receive buffer, without copying: each
 * vector buffer is a reference-counted {@link ArrowBuf} slice of the receive buffer, loaded with
 * Arrow's {@link VectorLoader}, after every layout has been checked against this rank's own.
 *
 * <p>Whose fault a failed check is: layouts written with another schema are the caller's ({@link
 * ResultCode#INVALID_USAGE}: every rank must produce the same schema); a layout that does not match
 * the schema's structure, or a block inconsistent with its layout, is the sending peer's ({@link
 * ResultCode#REMOTE_ERROR}). Both are an {@link NpuGatherException} naming the ranks and the
 * values. Arguments of this rank's own that do not fit together are an {@link
 * IllegalArgumentException} or an {@link IllegalStateException}.
 */
public final class ReceivedBlocks {
  /** The operation the exceptions name. */
  static final String OPERATION = "loadReceivedBlocks";

  private ReceivedBlocks() {}

  /**
   * Checks every layout, then rebuilds every peer's vectors.
   *
   * @param recv holds rank r's block at byte {@code displs[r]} for every {@code r != ownRank}; may
   *     be null when every other rank's block is empty. The vectors take their own references.
   * @param layouts every rank's layout, in rank order
   * @param displs every rank's byte displacement in {@code recv}, multiples of 8 ({@code
   *     displs[ownRank]} is not used); may hold one extra trailing entry
   * @param ownRank this rank
   * @param own this rank's block, the reference every layout is checked against
   * @param schemaName the schema as the caller's users know it, for the mismatch error
   * @param allocator allocator for the rebuilt vectors (they hold no memory of their own except
   *     validity bitmaps Arrow synthesizes for empty ones)
   * @return every rank's vectors, null at {@code ownRank}
   */
  public static VectorSchemaRoot[] load(
      ArrowBuf recv,
      List<BlockLayout> layouts,
      long[] displs,
      int ownRank,
      LocalBlock own,
      String schemaName,
      BufferAllocator allocator) {
    if (ownRank < 0 || ownRank >= layouts.size()) {
      throw new IllegalArgumentException(
          "ownRank " + ownRank + " is outside [0, " + layouts.size() + ")");
    }
    LocalBlock[] local = new LocalBlock[layouts.size()];
    local[ownRank] = own;
    return load(recv, layouts, displs, ownRank, local, schemaName, allocator);
  }

  /**
   * {@link #load(ArrowBuf, List, long[], int, LocalBlock, String, BufferAllocator)} where several
   * ranks' blocks are at hand ({@code local[r]} non-null: served from its own vectors, not from
   * {@code recv}), as on the ranks that share an executor.
   *
   * @param reporter the rank that runs the check: one of the local ranks, whose layout every other
   *     is checked against and whom the exceptions name
   * @return every rank's vectors, null where {@code local} has a block
   */
  public static VectorSchemaRoot[] load(
      ArrowBuf recv,
      List<BlockLayout> layouts,
      long[] displs,
      int reporter,
      LocalBlock[] local,
      String schemaName,
      BufferAllocator allocator) {
    int ranks = layouts.size();
    if (ranks == 0) {
      throw new IllegalArgumentException("layouts is empty: there must be one per rank");
    }
    if (local.length != ranks) {
      throw new IllegalArgumentException(
          "local has " + local.length + " entries for " + ranks + " rank(s)");
    }
    if (reporter < 0 || reporter >= ranks || local[reporter] == null) {
      throw new IllegalArgumentException(
          "reporter " + reporter + " is not one of the ranks whose blocks are at hand");
    }
    if (displs.length != ranks && displs.length != ranks + 1) {
      throw new IllegalArgumentException(
          "displs has " + displs.length + " entries for " + ranks + " rank(s)");
    }
    for (int r = 0; r < ranks; r++) {
      if (local[r] != null && !layouts.get(r).equals(local[r].layout())) {
        throw new IllegalStateException(
            "layout of rank " + r + " (at hand) differs from its own partition's layout");
      }
    }
    Schema arrowSchema = local[reporter].root().getSchema();
    check(recv, layouts, displs, reporter, local, arrowSchema, schemaName);
    VectorSchemaRoot[] roots = new VectorSchemaRoot[ranks];
    try {
      for (int r = 0; r < ranks; r++) {
        if (local[r] != null) {
          continue;
        }
        roots[r] = VectorSchemaRoot.create(arrowSchema, allocator);
        load(roots[r], recv, displs[r], layouts.get(r), allocator);
      }
      return roots;
    } catch (Throwable t) {
      for (VectorSchemaRoot root : roots) {
        if (root != null) {
          root.close();
        }
      }
      throw t;
    }
  }

  private static void check(
      ArrowBuf recv,
      List<BlockLayout> layouts,
      long[] displs,
      int ownRank,
      LocalBlock[] local,
      Schema arrowSchema,
      String schemaName) {
    long fp = layouts.get(ownRank).schemaFingerprint();
    int expectedNodes = expectedNodeCount(arrowSchema);
    int expectedBuffers = expectedBufferCount(arrowSchema);
    int[] topLevelNodes = topLevelNodeIndices(arrowSchema);
    long recvCapacity = recv == null ? 0 : recv.capacity();
    for (int r = 0; r < layouts.size(); r++) {
      BlockLayout l = layouts.get(r);
      if (l.schemaFingerprint() != fp) {
        throw new NpuGatherException(
            ResultCode.INVALID_USAGE,
            OPERATION,
            ownRank,
            "schema mismatch: rank "
                + r
                + " wrote its partition with schema fingerprint "
                + Long.toHexString(l.schemaFingerprint())
                + ", rank "
                + ownRank
                + " with "
                + Long.toHexString(fp)
                + " ("
                + schemaName
                + "); every rank must produce the same schema");
      }
      if (l.nodeCount() != expectedNodes
          || (expectedBuffers >= 0 && l.bufferCount() != expectedBuffers)) {
        throw new NpuGatherException(
            ResultCode.REMOTE_ERROR,
            OPERATION,
            ownRank,
            "layout of rank "
                + r
                + " has "
                + l.nodeCount()
                + " node(s) and "
                + l.bufferCount()
                + " buffer(s), the schema needs "
                + expectedNodes
                + " and "
                + expectedBuffers);
      }
      if (l.rowCount() > Integer.MAX_VALUE) {
        throw new NpuGatherException(
            ResultCode.REMOTE_ERROR,
            OPERATION,
            ownRank,
            "rank " + r + " has " + l.rowCount() + " rows, more than one Arrow batch can hold");
      }
      for (int node : topLevelNodes) {
        if (l.nodeLength(node) != l.rowCount()) {
          throw new NpuGatherException(
              ResultCode.REMOTE_ERROR,
              OPERATION,
              ownRank,
              "layout of rank "
                  + r
                  + ": a column has "
                  + l.nodeLength(node)
                  + " values for "
                  + l.rowCount()
                  + " rows");
        }
      }
      if (local[r] != null) {
        continue;
      }
      if (l.blockBytes() == 0) {
        if (expectedBuffers >= 0) {
          BlockValidator.check(arrowSchema, l, null, 0, r, ownRank);
        }
        continue;
      }
      long d = displs[r];
      if (d < 0 || (d & 7) != 0) {
        throw new IllegalStateException(
            "displacement of rank " + r + " is " + d + ", it must be a non-negative multiple of 8");
      }
      if (recv == null || d > recvCapacity - l.blockBytes()) {
        throw new IllegalStateException(
            "block of rank "
                + r
                + " ("
                + l.blockBytes()
                + " bytes at displacement "
                + d
                + ") does not fit in the receive buffer of "
                + recvCapacity
                + " bytes");
      }
      if (expectedBuffers >= 0) {
        BlockValidator.check(arrowSchema, l, recv, d, r, ownRank);
      }
    }
  }

  private static void load(
      VectorSchemaRoot root, ArrowBuf recv, long displ, BlockLayout l, BufferAllocator allocator) {
    List<ArrowBuf> slices = new ArrayList<>(l.bufferCount());
    for (int i = 0; i < l.bufferCount(); i++) {
      long len = l.bufferLength(i);
      slices.add(len == 0 ? allocator.getEmpty() : recv.slice(displ + l.bufferOffset(i), len));
    }
    // The record batch retains the slices, the loaded vectors retain them again; closing the
    // record batch leaves exactly the vectors' references.
    try (ArrowRecordBatch rb =
        new ArrowRecordBatch(
            (int) l.rowCount(),
            l.nodes(),
            slices,
            NoCompressionCodec.DEFAULT_BODY_COMPRESSION,
            l.variadicBufferCountList(),
            true,
            true)) {
      new VectorLoader(root).load(rb);
    }
  }

  /** Number of Arrow field nodes the schema produces in VectorLoader order. */
  private static int expectedNodeCount(Schema schema) {
    int n = 0;
    for (Field f : schema.getFields()) {
      n += nodes(f);
    }
    return n;
  }

  /** Index of every top-level field's node in VectorLoader order. */
  static int[] topLevelNodeIndices(Schema schema) {
    List<Field> fields = schema.getFields();
    int[] idx = new int[fields.size()];
    int n = 0;
    for (int i = 0; i < idx.length; i++) {
      idx[i] = n;
      n += nodes(fields.get(i));
    }
    return idx;
  }

  private static int nodes(Field f) {
    int n = 1;
    for (Field c : f.getChildren()) {
      n += nodes(c);
    }
    return n;
  }

  /**
   * Number of Arrow buffers the schema produces in VectorLoader order, not counting the variadic
   * data buffers of view types; -1 if the schema holds a view type (whose count varies).
   */
  private static int expectedBufferCount(Schema schema) {
    int n = 0;
    for (Field f : schema.getFields()) {
      int b = buffers(f);
      if (b < 0) {
        return -1;
      }
      n += b;
    }
    return n;
  }

  private static int buffers(Field f) {
    ArrowType t = f.getType();
    if (t instanceof ArrowType.Utf8View || t instanceof ArrowType.BinaryView) {
      return -1;
    }
    int n = TypeLayout.getTypeBufferCount(t);
    for (Field c : f.getChildren()) {
      int b = buffers(c);
      if (b < 0) {
        return -1;
      }
      n += b;
    }
    return n;
  }
}
