package io.npugather.block;

import java.util.List;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.util.MemoryUtil;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.VectorUnloader;
import org.apache.arrow.vector.compression.NoCompressionCodec;
import org.apache.arrow.vector.ipc.message.ArrowFieldNode;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;

/**
 * This rank's block: Arrow vectors, the {@link BlockLayout} describing them, and the memory
 * segments that send them.
 *
 * <p>The segments ({@link #segmentAddresses()}, {@link #segmentLengths()}) point straight at the
 * vectors' buffers (no copy); their concatenation is the block {@link #layout()} describes. A
 * buffer whose length is not a multiple of 8 is padded with zeros: inside its own allocation when
 * it has the room (the usual case: one segment per buffer), else by a padding segment pointing at a
 * small zeroed buffer. Addresses stay valid until {@link #close()}. Not thread-safe.
 */
public final class LocalBlock implements AutoCloseable {
  private final VectorSchemaRoot root;
  private final BlockLayout layout;
  private final long[] segmentAddresses;
  private final long[] segmentLengths;
  private ArrowBuf zeros;
  private boolean closed;

  /**
   * Takes ownership of {@code root}, whose vectors are complete (value counts set).
   *
   * @param allocator allocates the zeroed padding buffer, if one is needed
   */
  public static LocalBlock of(VectorSchemaRoot root, BufferAllocator allocator) {
    return new LocalBlock(root, allocator, true);
  }

  /** {@code padInPlace} false: every padding is a segment of its own (what a full buffer needs). */
  LocalBlock(VectorSchemaRoot root, BufferAllocator allocator, boolean padInPlace) {
    this.root = root;
    long fingerprint = SchemaFingerprint.of(root.getSchema());
    // Built once: the buffer list and nodes in VectorLoader order, straight from Arrow's unloader.
    try (ArrowRecordBatch rb =
        new VectorUnloader(root, true, NoCompressionCodec.INSTANCE, true).getRecordBatch()) {
      List<ArrowFieldNode> nodes = rb.getNodes();
      long[] lengths = new long[nodes.size()];
      long[] nulls = new long[nodes.size()];
      for (int i = 0; i < lengths.length; i++) {
        lengths[i] = nodes.get(i).getLength();
        nulls[i] = nodes.get(i).getNullCount();
      }
      List<ArrowBuf> bufs = rb.getBuffers();
      long[] bufferLengths = new long[bufs.size()];
      // Padding goes into a buffer's own slack when it has room (zeroed here, beyond the values),
      // so that buffer is one segment; otherwise a padding segment points at a zeroed buffer.
      boolean[] paddedInPlace = new boolean[bufs.size()];
      int segments = 0;
      boolean needZeros = false;
      for (int i = 0; i < bufferLengths.length; i++) {
        ArrowBuf b = bufs.get(i);
        long len = b.readableBytes();
        bufferLengths[i] = len;
        if (len == 0) {
          continue;
        }
        segments++;
        long pad = BlockLayout.align8(len) - len;
        if (pad != 0) {
          if (padInPlace && b.capacity() - b.readerIndex() >= len + pad) {
            b.setZero(b.readerIndex() + len, pad);
            paddedInPlace[i] = true;
          } else {
            segments++;
            needZeros = true;
          }
        }
      }
      List<Long> variadic = rb.getVariadicBufferCounts();
      long[] variadicCounts = new long[variadic == null ? 0 : variadic.size()];
      for (int i = 0; i < variadicCounts.length; i++) {
        variadicCounts[i] = variadic.get(i);
      }
      this.layout =
          new BlockLayout(
              fingerprint, root.getRowCount(), lengths, nulls, bufferLengths, variadicCounts);
      if (needZeros) {
        zeros = allocator.buffer(8);
        zeros.setZero(0, 8);
      }
      this.segmentAddresses = new long[segments];
      this.segmentLengths = new long[segments];
      int s = 0;
      for (int i = 0; i < bufferLengths.length; i++) {
        ArrowBuf b = bufs.get(i);
        long len = bufferLengths[i];
        if (len == 0) {
          continue;
        }
        long pad = BlockLayout.align8(len) - len;
        segmentAddresses[s] = b.memoryAddress() + b.readerIndex();
        if (paddedInPlace[i]) {
          segmentLengths[s++] = len + pad;
          continue;
        }
        segmentLengths[s++] = len;
        if (pad != 0) {
          segmentAddresses[s] = zeros.memoryAddress();
          segmentLengths[s++] = pad;
        }
      }
    }
  }

  /** This rank's metadata. */
  public BlockLayout layout() {
    return layout;
  }

  /** The Arrow vectors holding the block. Valid until {@link #close()}; do not modify. */
  public VectorSchemaRoot root() {
    checkOpen();
    return root;
  }

  /**
   * Start addresses of what to send, in order. Their concatenation is exactly {@code
   * layout().blockBytes()} bytes laid out as {@link #layout()} says. Zero-length buffers have no
   * segment. Returns a copy.
   */
  public long[] segmentAddresses() {
    return segmentAddresses.clone();
  }

  /** Lengths of the segments of {@link #segmentAddresses()}. Returns a copy. */
  public long[] segmentLengths() {
    return segmentLengths.clone();
  }

  /**
   * Copies the segments, in order, to {@code address}: the block as one contiguous buffer of {@code
   * layout().blockBytes()} bytes, as a peer receives it.
   */
  public void copyTo(long address) {
    checkOpen();
    long at = address;
    for (int s = 0; s < segmentAddresses.length; s++) {
      MemoryUtil.copyMemory(segmentAddresses[s], at, segmentLengths[s]);
      at += segmentLengths[s];
    }
  }

  /** Number of segments. */
  int segmentCount() {
    return segmentAddresses.length;
  }

  private void checkOpen() {
    if (closed) {
      throw new IllegalStateException("LocalBlock is closed");
    }
  }

  /** Releases every vector and the padding buffer. Idempotent. */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    try {
      root.close();
    } finally {
      if (zeros != null) {
        zeros.close();
        zeros = null;
      }
    }
  }
}
