package io.npugather;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;

/**
 * The all-gather operator: every rank passes a tensor x of the same shape {@code [d0, ..., dn]} (1
 * to 7 dims) and dtype; every rank receives {@code [rankSize, d0, ..., dn]}, the inputs stacked in
 * rank order.
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
    return inferShape(
        x, param.communicator() != null ? param.communicator().rankSize() : param.rankSize());
  }

  private static long[] inferShape(long[] x, int rankSize) {
    Objects.requireNonNull(x, "x shape");
    if (x.length < 1 || x.length > MAX_INPUT_DIMS) {
      throw new IllegalArgumentException(
          "x: "
              + x.length
              + " dims "
              + Arrays.toString(x)
              + "; allowed: 1 to "
              + MAX_INPUT_DIMS
              + " dims");
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
      throw new IllegalStateException(
          "AllGatherParam.communicator is not set; "
              + "pass a Communicator to execute(Communicator, Tensor, BufferAllocator)");
    }
    return execute(communicator, x, allocator);
  }

  /**
   * Gathers {@code x} from every rank of {@code communicator} into a new tensor allocated from
   * {@code allocator}, which the caller owns (and closes). The communicator stays open.
   *
   * <p>A rank whose input is rejected here (x null, closed or of 0 or 8 dims, a rank or rankSize in
   * the param that the communicator does not have, an output it cannot allocate) still takes part
   * in the exchange of descriptors and flags the rejection, so every rank fails at once with the
   * same {@link ResultCode#INVALID_USAGE} error naming that rank and its input. Only a null
   * communicator or allocator, or a closed communicator, fails this rank alone: nothing can be
   * exchanged without them.
   */
  public Tensor execute(Communicator communicator, Tensor x, BufferAllocator allocator) {
    Objects.requireNonNull(communicator, "communicator");
    Objects.requireNonNull(allocator, "allocator");
    Descriptor mine = Descriptor.of(x);
    int rankSize = communicator.rankSize();
    if (mine.rejection == Rejection.NONE && param.rankSize() != 0 && param.rankSize() != rankSize) {
      mine = mine.rejected(Rejection.RANK_SIZE, param.rankSize());
    }
    if (mine.rejection == Rejection.NONE
        && param.rank() != 0
        && param.rank() != communicator.rank()) {
      mine = mine.rejected(Rejection.RANK, param.rank());
    }
    Tensor out = null;
    RuntimeException localCause = null;
    if (mine.rejection == Rejection.NONE) {
      long[] outShape = inferShape(x.shape(), rankSize);
      try {
        out = Tensor.allocate(allocator, x.dtype(), outShape);
      } catch (RuntimeException e) {
        localCause = e;
        mine = mine.rejected(Rejection.OUTPUT, rankSize);
      }
    }
    try {
      checkSameInputOnEveryRank(communicator, mine, allocator, localCause);
      communicator.allGather(x.buffer(), out.buffer(), x.elementCount(), x.dtype());
      Tensor gathered = out;
      out = null;
      return gathered;
    } finally {
      if (out != null) {
        out.close();
      }
    }
  }

  /**
   * All ranks exchange their descriptors; a rejection or any difference fails every rank with the
   * same error. {@code localCause}, the exception behind this rank's own rejection, is attached on
   * this rank only.
   */
  private static void checkSameInputOnEveryRank(
      Communicator communicator,
      Descriptor mine,
      BufferAllocator allocator,
      RuntimeException localCause) {
    int rankSize = communicator.rankSize();
    List<Descriptor> all = new ArrayList<>(rankSize);
    try (ArrowBuf send = allocator.buffer(Descriptor.BYTES);
        ArrowBuf recv = allocator.buffer((long) Descriptor.BYTES * rankSize)) {
      mine.write(send);
      communicator.allGather(send, recv, Descriptor.BYTES, DType.INT8);
      for (int r = 0; r < rankSize; r++) {
        all.add(Descriptor.read(recv, (long) Descriptor.BYTES * r));
      }
    } catch (RuntimeException e) {
      if (mine.rejection == Rejection.NONE) {
        throw e;
      }
      // The peers could not be told; this rank still reports its own rejection.
      int rank = communicator.rank();
      NpuGatherException own =
          new NpuGatherException(
              ResultCode.INVALID_USAGE,
              "AllGatherOperation",
              rank,
              mine.rejectionText(rank, rankSize));
      own.addSuppressed(e);
      if (localCause != null) {
        own.addSuppressed(localCause);
      }
      throw own;
    }
    List<String> rejections = new ArrayList<>();
    List<String> inputs = new ArrayList<>(rankSize);
    boolean same = true;
    for (int r = 0; r < rankSize; r++) {
      Descriptor d = all.get(r);
      if (d.rejection != Rejection.NONE) {
        rejections.add(d.rejectionText(r, rankSize));
      }
      same &= d.sameInput(all.get(0));
      inputs.add("rank " + r + ": " + d.input());
    }
    String text = null;
    if (!rejections.isEmpty()) {
      text = String.join("; ", rejections) + "; every rank fails: none gathered anything";
    } else if (!same) {
      text =
          "ranks passed different inputs ("
              + String.join(", ", inputs)
              + "); all ranks must pass the same shape and dtype";
    }
    if (text != null) {
      NpuGatherException e =
          new NpuGatherException(
              ResultCode.INVALID_USAGE, "AllGatherOperation", communicator.rank(), text);
      if (localCause != null) {
        e.initCause(localCause);
      }
      throw e;
    }
  }

  /** Why a rank rejected its own input; the codes travel in the descriptor. */
  private enum Rejection {
    NONE,
    X_NULL,
    X_CLOSED,
    DIMS,
    RANK_SIZE,
    RANK,
    OUTPUT,
    UNKNOWN;

    static Rejection fromCode(int code) {
      return code >= 0 && code < UNKNOWN.ordinal() ? values()[code] : UNKNOWN;
    }
  }

  /**
   * One rank's input as every rank sees it: dtype code (-1 for none), dim count, rejection code,
   * the rejection's value, then up to {@link Tensor#MAX_DIMS} dims.
   */
  private record Descriptor(int dtypeCode, long[] shape, Rejection rejection, long value) {
    static final int BYTES = 24 + 8 * Tensor.MAX_DIMS;

    static Descriptor of(Tensor x) {
      if (x == null) {
        return new Descriptor(-1, new long[0], Rejection.X_NULL, 0);
      }
      Descriptor d = new Descriptor(x.dtype().nativeCode(), x.shape(), Rejection.NONE, 0);
      if (!x.isOpen()) {
        return d.rejected(Rejection.X_CLOSED, 0);
      }
      if (x.dims() < 1 || x.dims() > MAX_INPUT_DIMS) {
        return d.rejected(Rejection.DIMS, x.dims());
      }
      return d;
    }

    Descriptor rejected(Rejection why, long whyValue) {
      return new Descriptor(dtypeCode, shape, why, whyValue);
    }

    void write(ArrowBuf buf) {
      buf.setZero(0, BYTES);
      buf.setInt(0, dtypeCode);
      buf.setInt(4, shape.length);
      buf.setInt(8, rejection.ordinal());
      buf.setLong(16, value);
      for (int i = 0; i < shape.length; i++) {
        buf.setLong(24 + 8L * i, shape[i]);
      }
    }

    static Descriptor read(ArrowBuf buf, long base) {
      int dims = Math.max(0, Math.min(Tensor.MAX_DIMS, buf.getInt(base + 4)));
      long[] shape = new long[dims];
      for (int i = 0; i < dims; i++) {
        shape[i] = buf.getLong(base + 24 + 8L * i);
      }
      return new Descriptor(
          buf.getInt(base),
          shape,
          Rejection.fromCode(buf.getInt(base + 8)),
          buf.getLong(base + 16));
    }

    boolean sameInput(Descriptor other) {
      return dtypeCode == other.dtypeCode && Arrays.equals(shape, other.shape);
    }

    /** {@code dtype[dims]} as {@link Tensor#toString()} writes it. */
    String input() {
      DType dtype = DType.fromNativeCode(dtypeCode);
      return (dtype == null ? "dtype " + dtypeCode : dtype.toString()) + Arrays.toString(shape);
    }

    String rejectionText(int rank, int rankSize) {
      String input = "rank " + rank + " rejected its input: ";
      String param = "rank " + rank + " rejected its AllGatherParam: ";
      return switch (rejection) {
        case NONE -> "rank " + rank + " accepted its input " + input();
        case X_NULL -> input + "x is null; allowed: a tensor of 1 to " + MAX_INPUT_DIMS + " dims";
        case X_CLOSED -> input + "x = " + input() + " is closed; allowed: an open tensor";
        case DIMS ->
            input
                + "x = "
                + input()
                + " has "
                + value
                + " dims; allowed: 1 to "
                + MAX_INPUT_DIMS
                + " dims";
        case RANK_SIZE ->
            param
                + "rankSize = "
                + value
                + " but the communicator has "
                + rankSize
                + " ranks; allowed: 0 or "
                + rankSize;
        case RANK ->
            param
                + "rank = "
                + value
                + " but it is rank "
                + rank
                + " of the communicator; allowed: 0 or "
                + rank;
        case OUTPUT ->
            input
                + "x = "
                + input()
                + ": its output "
                + input().replace("[", "[" + value + ", ")
                + " could not be allocated (beyond its allocator's limit or 64-bit sizes)";
        case UNKNOWN ->
            "rank "
                + rank
                + " rejected its input for a reason this library version"
                + " does not know";
      };
    }
  }
}
