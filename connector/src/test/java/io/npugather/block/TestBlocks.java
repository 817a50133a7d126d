package io.npugather.block;

import java.util.ArrayList;
import java.util.List;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.util.TransferPair;

/** Blocks as the tests need them, beyond what {@link LocalBlock#of} builds. */
public final class TestBlocks {
  private TestBlocks() {}

  /**
   * {@code block}'s vectors, moved into a block that pads every buffer with a segment of its own,
   * as a buffer without room for its padding needs; {@code block} is closed. The zeroed padding
   * buffer comes from {@code allocator}.
   */
  public static LocalBlock withPaddingSegments(LocalBlock block, BufferAllocator allocator) {
    VectorSchemaRoot from = block.root();
    List<FieldVector> moved = new ArrayList<>();
    for (FieldVector v : from.getFieldVectors()) {
      TransferPair transfer = v.getTransferPair(v.getAllocator());
      transfer.transfer();
      moved.add((FieldVector) transfer.getTo());
    }
    VectorSchemaRoot root =
        new VectorSchemaRoot(from.getSchema().getFields(), moved, from.getRowCount());
    block.close();
    return new LocalBlock(root, allocator, false);
  }
}
