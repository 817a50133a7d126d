package io.npugather.block;

import static io.npugather.spark.arrow.ArrowTestSupport.TZ;
import static io.npugather.spark.arrow.ArrowTestSupport.randomRows;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.spark.arrow.WithRootAllocator;
import io.npugather.spark.arrow.write.PartitionWriter;
import io.npugather.spark.arrow.write.PartitionWriterTest;
import java.util.List;
import java.util.Random;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;

/** A rank's block: its segments are its layout's bytes, padding zeroed, however it is padded. */
class LocalBlockTest extends WithRootAllocator {
  private static final StructType SCHEMA = PartitionWriterTest.SCHEMA;

  @Test
  void segmentsConcatenateToTheBlockWithZeroPadding() {
    checkSegments(true);
    checkSegments(false);
  }

  private void checkSegments(boolean padInPlace) {
    for (int rows : new int[] {0, 1, 7, 333}) {
      LocalBlock written =
          PartitionWriter.fromRows(
              randomRows(SCHEMA, rows, new Random(22 + rows), 0.2).iterator(), SCHEMA, TZ, root);
      try (LocalBlock p = padInPlace ? written : TestBlocks.withPaddingSegments(written, root);
          org.apache.arrow.memory.ArrowBuf block =
              root.buffer(Math.max(8, p.layout().blockBytes()))) {
        long[] addr = p.segmentAddresses();
        long[] len = p.segmentLengths();
        assertEquals(p.segmentCount(), addr.length);
        long total = 0;
        for (long l : len) {
          assertTrue(l > 0);
          total += l;
        }
        BlockLayout l = p.layout();
        assertEquals(l.blockBytes(), total);
        boolean padSegments = java.util.Arrays.stream(len).anyMatch(x -> x % 8 != 0);
        if (padInPlace) {
          assertTrue(!padSegments, "Arrow's buffers have room for their padding");
        } else if (rows > 0) {
          assertTrue(padSegments, "padding segments in use");
        }
        block.setOne(0, block.capacity());
        p.copyTo(block.memoryAddress());
        // Buffers sit at their layout offsets: compare with the vectors' own buffers, in order.
        try (org.apache.arrow.vector.ipc.message.ArrowRecordBatch rb =
            new org.apache.arrow.vector.VectorUnloader(p.root()).getRecordBatch()) {
          List<org.apache.arrow.memory.ArrowBuf> bufs = rb.getBuffers();
          assertEquals(l.bufferCount(), bufs.size());
          for (int i = 0; i < bufs.size(); i++) {
            long n = l.bufferLength(i);
            assertEquals(bufs.get(i).readableBytes(), n);
            for (long k = 0; k < n; k++) {
              assertEquals(
                  bufs.get(i).getByte(k),
                  block.getByte(l.bufferOffset(i) + k),
                  "buffer " + i + " byte " + k);
            }
            for (long k = n; k < BlockLayout.align8(n); k++) {
              assertEquals(0, block.getByte(l.bufferOffset(i) + k), "padding of buffer " + i);
            }
          }
        }
      }
    }
  }
}
