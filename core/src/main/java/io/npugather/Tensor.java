package io.npugather;

import java.util.Arrays;
import java.util.Objects;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;

/**
 * A dense, row-major (ND) tensor in off-heap memory owned by an Arrow {@link BufferAllocator}.
 *
 * <p>The tensor owns one reference to its buffer and releases it in {@link #close()}; closing twice
 * is an error. Element {@code (i0, ..., in)} sits at byte offset {@code flatIndex *
 * dtype.byteWidth()}, little-endian as Arrow stores it.
 */
public final class Tensor implements AutoCloseable {
  /** Most dims of any tensor here: the operator's output has one more than its input's 7. */
  public static final int MAX_DIMS = 8;

  private final DType dtype;
  private final long[] shape;
  private final ArrowBuf buffer;
  private boolean closed;

  private Tensor(DType dtype, long[] shape, ArrowBuf buffer) {
    this.dtype = dtype;
    this.shape = shape;
    this.buffer = buffer;
  }

  /** Allocates a zero-filled tensor of the given shape from {@code allocator}. */
  public static Tensor allocate(BufferAllocator allocator, DType dtype, long... shape) {
    Objects.requireNonNull(allocator, "allocator");
    long bytes = byteSize(dtype, shape);
    ArrowBuf buffer = allocator.buffer(bytes);
    buffer.setZero(0, bytes);
    return new Tensor(dtype, shape.clone(), buffer);
  }

  /**
   * Wraps {@code buffer} (which must hold at least the tensor's bytes) and takes over one reference
   * to it: the tensor's {@link #close()} releases it.
   */
  public static Tensor wrap(ArrowBuf buffer, DType dtype, long... shape) {
    Objects.requireNonNull(buffer, "buffer");
    long bytes = byteSize(dtype, shape);
    if (buffer.capacity() < bytes) {
      throw new IllegalArgumentException(
          "buffer: capacity "
              + buffer.capacity()
              + " bytes is less than the "
              + bytes
              + " bytes of a "
              + dtype
              + Arrays.toString(shape)
              + " tensor");
    }
    return new Tensor(dtype, shape.clone(), buffer);
  }

  /** Bytes of a dense tensor, checking the shape. */
  static long byteSize(DType dtype, long[] shape) {
    Objects.requireNonNull(dtype, "dtype");
    Objects.requireNonNull(shape, "shape");
    if (shape.length > MAX_DIMS) {
      throw new IllegalArgumentException(
          "shape: "
              + shape.length
              + " dims "
              + Arrays.toString(shape)
              + "; allowed: at most "
              + MAX_DIMS);
    }
    long elements = 1;
    for (int i = 0; i < shape.length; i++) {
      if (shape[i] < 0) {
        throw new IllegalArgumentException(
            "shape[" + i + "] = " + shape[i] + " in " + Arrays.toString(shape) + "; allowed: >= 0");
      }
      if (shape[i] != 0 && elements > Long.MAX_VALUE / shape[i] / dtype.byteWidth()) {
        throw new IllegalArgumentException(
            "shape "
                + Arrays.toString(shape)
                + " of "
                + dtype
                + ": its size in bytes overflows 64 bits at shape["
                + i
                + "]; allowed: at most "
                + Long.MAX_VALUE
                + " bytes");
      }
      elements *= shape[i];
    }
    return elements * dtype.byteWidth();
  }

  public DType dtype() {
    return dtype;
  }

  /** A copy of the shape. */
  public long[] shape() {
    return shape.clone();
  }

  /** Number of dims. */
  public int dims() {
    return shape.length;
  }

  public long elementCount() {
    long elements = 1;
    for (long dim : shape) {
      elements *= dim;
    }
    return elements;
  }

  public long byteSize() {
    return elementCount() * dtype.byteWidth();
  }

  /** The off-heap buffer (still owned by this tensor). */
  public ArrowBuf buffer() {
    checkOpen();
    return buffer;
  }

  /** True until {@link #close()}. */
  public boolean isOpen() {
    return !closed;
  }

  /** Releases this tensor's reference to its buffer. */
  @Override
  public void close() {
    checkOpen();
    closed = true;
    buffer.close();
  }

  private void checkOpen() {
    if (closed) {
      throw new IllegalStateException("Tensor " + this + " is already closed");
    }
  }

  @Override
  public String toString() {
    return dtype + Arrays.toString(shape);
  }
}
