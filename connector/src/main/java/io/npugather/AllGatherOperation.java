package io.npugather;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;

/**
 * The all-gather operator: every rank passes a tensor x of the same shape {@code [d0, ..., dn]}
 * (1 to 7 dims) and dtype; every rank receives {@code [rankSize, d0, ..., dn]}, the inputs
 * stacked in rank order.
 *
 * <p>Before any data moves, the ranks exchange their shapes and dtypes, so a mismatch is the same
 * clear error on every rank rather than a hang or a corrupt result.
 */
public final class AllGatherOperation {
  /** Most dims of the input (the output has one more). */
  public static final int MAX_INPUT_DIMS = Tensor.MAX_DIMS - 1;

  /** Bytes of one rank's shape descriptor: dtype code, dim count, then up to 7 dims. */
  private static final int DESCRIPTOR_BYTES = 8 + 8 * MAX_INPUT_DIMS;

  private final AllGatherParam param;

  public AllGatherOperation(AllGatherParam param) {
    this.param = Objects.requireNonNull(param, "param").validate();
  }

  public AllGatherParam param() {
    return param;
  }

  /** The output shape for input shape {@code x}: {@code [rankSize] + x}. */
  public long[] inferShape(long[] x) {
    return inferShape(x, rankSize(null));
  }

  private static long[] inferShape(long[] x, int rankSize) {
    Objects.requireNonNull(x, "x shape");
    if (x.length < 1 || x.length > MAX_INPUT_DIMS) {
      throw new IllegalArgumentException("x: " + x.length + " dims " + Arrays.toString(x)
          + "; allowed: 1 to " + MAX_INPUT_DIMS + " dims");
    }
    long[] out = new long[x.length + 1];
    out[0] = rankSize;
    System.arraycopy(x, 0, out, 1, x.length);
    return out;
  }

  /** Runs on the caller's communicator given in {@link AllGatherParam#communicator()}. */
  public Tensor execute(Tensor x, BufferAllocator allocator) {
    Communicator communicator = param.communicator();
    if (communicator == null) {
      throw new IllegalStateException("AllGatherParam.communicator is not set; "
          + "pass a Communicator to execute(Communicator, Tensor, BufferAllocator)");
    }
    return execute(communicator, x, allocator);
  }

  /**
   * Gathers {@code x} from every rank of {@code communicator} into a new tensor allocated from
   * {@code allocator}, which the caller owns (and closes). The communicator stays open.
   */
  public Tensor execute(Communicator communicator, Tensor x, BufferAllocator allocator) {
    Objects.requireNonNull(communicator, "communicator");
    Objects.requireNonNull(x, "x");
    Objects.requireNonNull(allocator, "allocator");
    int rankSize = rankSize(communicator);
    long[] outShape = inferShape(x.shape(), rankSize);
    checkSameInputOnEveryRank(communicator, x, allocator);
    Tensor out = Tensor.allocate(allocator, x.dtype(), outShape);
    try {
      communicator.allGather(x.buffer(), out.buffer(), x.elementCount(), x.dtype());
      return out;
    } catch (RuntimeException e) {
      out.close();
      throw e;
    }
  }

  private int rankSize(Communicator communicator) {
    if (communicator != null) {
      if (param.rankSize() != 0 && param.rankSize() != communicator.rankSize()) {
        throw new IllegalArgumentException("AllGatherParam.rankSize = " + param.rankSize()
            + " but the communicator has " + communicator.rankSize() + " ranks");
      }
      return communicator.rankSize();
    }
    return param.communicator() != null ? param.communicator().rankSize() : param.rankSize();
  }

  /** All ranks exchange (dtype, shape); any difference fails every rank with the full table. */
  private static void checkSameInputOnEveryRank(
      Communicator communicator, Tensor x, BufferAllocator allocator) {
    int rankSize = communicator.rankSize();
    try (ArrowBuf mine = allocator.buffer(DESCRIPTOR_BYTES);
        ArrowBuf all = allocator.buffer((long) DESCRIPTOR_BYTES * rankSize)) {
      mine.setZero(0, DESCRIPTOR_BYTES);
      mine.setInt(0, x.dtype().nativeCode());
      mine.setInt(4, x.dims());
      long[] shape = x.shape();
      for (int i = 0; i < shape.length; i++) {
        mine.setLong(8 + 8L * i, shape[i]);
      }
      communicator.allGather(mine, all, DESCRIPTOR_BYTES, DType.INT8);
      List<String> inputs = new ArrayList<>(rankSize);
      boolean same = true;
      for (int r = 0; r < rankSize; r++) {
        long base = (long) DESCRIPTOR_BYTES * r;
        DType dtype = DType.fromNativeCode(all.getInt(base));
        int dims = Math.max(0, Math.min(MAX_INPUT_DIMS, all.getInt(base + 4)));
        long[] dimsOfRank = new long[dims];
        for (int i = 0; i < dims; i++) {
          dimsOfRank[i] = all.getLong(base + 8 + 8L * i);
        }
        same &= dtype == x.dtype() && Arrays.equals(dimsOfRank, shape);
        inputs.add("rank " + r + ": " + dtype + Arrays.toString(dimsOfRank));
      }
      if (!same) {
        throw new NpuGatherException(ResultCode.INVALID_USAGE, "AllGatherOperation",
            communicator.rank(), "ranks passed different inputs (" + String.join(", ", inputs)
                + "); all ranks must pass the same shape and dtype");
      }
    }
  }
}
