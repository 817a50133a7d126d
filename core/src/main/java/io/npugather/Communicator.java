package io.npugather;

import io.npugather.bridge.NativeCore;
import java.util.Objects;
import org.apache.arrow.memory.ArrowBuf;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.PointerPointer;
import org.bytedeco.javacpp.SizeTPointer;

/**
 * One rank's membership in a group of ranks that run collectives together.
 *
 * <p>Created from the root rank's {@link RootInfo} ({@link #create}); {@link #close()} releases its
 * native resources (sockets, shared memory) and may be called once. One collective runs at a time;
 * {@link #abort()} may be called from any thread and makes a blocked collective fail promptly with
 * {@link ResultCode#ABORTED} (its peers then fail with a remote error).
 */
public final class Communicator implements AutoCloseable {
  private static final int UINT8 = 7;

  static {
    NativeLibrary.load();
  }

  private final Object lock = new Object();
  private final int rank;
  private final int rankSize;
  private final String backend;
  private final String transport;
  private Pointer handle;
  private int activeCalls;

  private Communicator(Pointer handle, int rank, int rankSize, String backend) {
    this.handle = handle;
    this.rank = rank;
    this.rankSize = rankSize;
    this.backend = backend;
    this.transport = NativeCore.npg_comm_transport(handle).getString();
  }

  /**
   * Creates the root info on the root rank; every rank, the root included, passes it to {@link
   * #create}. For {@code host} the root's endpoint stays open in this process until its {@link
   * #create} consumes it (succeeding or failing) or {@link RootInfo#close()} releases it.
   */
  public static RootInfo createRootInfo(String backend, CommunicatorOptions options) {
    Objects.requireNonNull(options, "options");
    Backend type = Backend.parse("backend", backend);
    try (BytePointer out = new BytePointer(NativeCore.ROOT_INFO_MAX_BYTES);
        SizeTPointer size = new SizeTPointer(1)) {
      // A device backend makes its root info on a device: the rank's own, named as "device:N".
      String bind = options.bindAddress();
      if (type.needsDevice() && bind == null && options.deviceId() >= 0) {
        bind =
            "device:"
                + options.deviceId()
                + (type.timeoutAtRootInfo() ? ",timeout_ms:" + options.timeout().toMillis() : "");
      }
      int rc =
          NativeCore.npg_get_root_info(backend, bind, out, NativeCore.ROOT_INFO_MAX_BYTES, size);
      NativeStatus.check(rc, "createRootInfo", -1);
      byte[] bytes = new byte[(int) size.get()];
      out.get(bytes);
      return RootInfo.of(backend, bytes);
    }
  }

  /**
   * Joins the communicator described by {@code param} (rank, rankSize, rankRoot, backend, commMode,
   * rankTableFile, commDomain). Blocks until every rank has joined or the timeout elapses. {@code
   * rootInfo} may be null when a rank table file describes the cluster (hccl), or with backend lccl
   * when {@code commDomain} is set (multi-process: LCCL's "ID:SIZE_MB" domain; multi-thread: the
   * uid every rank thread passes).
   *
   * @throws IllegalArgumentException for invalid parameters, before any communication
   * @throws NpuGatherException when joining fails (timeout, a peer's failure, ...)
   */
  public static Communicator create(
      AllGatherParam param, RootInfo rootInfo, CommunicatorOptions options) {
    try {
      return createOrThrow(param, rootInfo, options);
    } catch (RuntimeException e) {
      // A root's failed create consumes its root info: nothing stays parked for it.
      if (param != null && rootInfo != null && param.rank() == param.rankRoot()) {
        try {
          rootInfo.close();
        } catch (RuntimeException closing) {
          e.addSuppressed(closing);
        }
      }
      throw e;
    }
  }

  private static Communicator createOrThrow(
      AllGatherParam param, RootInfo rootInfo, CommunicatorOptions options) {
    Objects.requireNonNull(param, "param").validate();
    Objects.requireNonNull(options, "options");
    if (param.communicator() != null) {
      throw new IllegalArgumentException(
          "AllGatherParam.communicator is set; a caller's communicator is used as it is");
    }
    boolean joinsByDomain = param.backendType().numberedDomain() && !param.commDomain().isEmpty();
    if (rootInfo == null && param.rankTableFile().isEmpty() && !joinsByDomain) {
      throw new IllegalArgumentException(
          "rootInfo is null; allowed: the root rank's RootInfo, or"
              + " null with a rankTableFile (hccl) or a commDomain (lccl)");
    }
    if (rootInfo != null && !rootInfo.backend().equals(param.backend())) {
      throw new IllegalArgumentException(
          "rootInfo was made for backend '"
              + rootInfo.backend()
              + "' but AllGatherParam.backend = '"
              + param.backend()
              + "'");
    }
    int flags =
        switch (options.hostTransport()) {
          case AUTO -> 0;
          case TCP -> NativeCore.FLAG_FORCE_TCP;
          case STAGING -> NativeCore.FLAG_FORCE_STAGING;
        };
    byte[] bytes = rootInfo == null ? new byte[0] : rootInfo.bytes();
    try (BytePointer info = rootInfo == null ? null : new BytePointer(bytes.length);
        PointerPointer<Pointer> out = new PointerPointer<>(1)) {
      if (info != null) {
        info.put(bytes);
      }
      int rc =
          NativeCore.npg_comm_init(
              param.backend(),
              param.rank(),
              param.rankSize(),
              param.rankRoot(),
              param.commDomain(),
              param.commMode().nativeCode(),
              options.deviceId(),
              param.rankTableFile(),
              options.timeout().toMillis(),
              flags,
              info,
              bytes.length,
              out);
      NativeStatus.check(rc, "create", param.rank());
      return new Communicator(out.get(0), param.rank(), param.rankSize(), param.backend());
    }
  }

  /**
   * Native communicators of this process that were created and not yet released by {@link
   * #close()}: 0 when nothing leaked (for leak checks).
   */
  public static long liveCount() {
    return NativeCore.npg_live_comms();
  }

  public int rank() {
    return rank;
  }

  public int rankSize() {
    return rankSize;
  }

  public String backend() {
    return backend;
  }

  /**
   * How data moves: for {@code host} "self", "threads", "cma" (cross-memory attach), "staging"
   * (through shared memory), "tcp" (flat ring) or, for several hosts with the same number of ranks
   * each, "tcp-hier+cma", "tcp-hier+threads" or "tcp-hier+staging" (rings across hosts, shared
   * memory within each).
   */
  public String transport() {
    return transport;
  }

  /**
   * All-gather with equal sizes: {@code count} elements from {@code send} land at element {@code
   * rank * count} of {@code recv} on every rank.
   */
  public void allGather(ArrowBuf send, ArrowBuf recv, long count, DType dtype) {
    checkArguments(
        "allGather",
        () -> {
          long bytes = checkedBytes("allGather", count, dtype);
          requireCapacity("allGather", "send", send, 0, bytes);
          requireCapacity("allGather", "recv", recv, 0, bytes * rankSize);
        });
    call(
        "allGather",
        () ->
            NativeCore.npg_all_gather(
                handle(), send.memoryAddress(), recv.memoryAddress(), count, dtype.nativeCode()));
  }

  /**
   * {@link #allGather} with this rank's input already in its slot of {@code recv}: moves none of
   * it.
   */
  public void allGatherInPlace(ArrowBuf recv, long count, DType dtype) {
    checkArguments(
        "allGatherInPlace",
        () ->
            requireCapacity(
                "allGatherInPlace",
                "recv",
                recv,
                0,
                checkedBytes("allGatherInPlace", count, dtype) * rankSize));
    long own = recv.memoryAddress() + rank * count * dtype.byteWidth();
    call(
        "allGatherInPlace",
        () ->
            NativeCore.npg_all_gather(
                handle(), own, recv.memoryAddress(), count, dtype.nativeCode()));
  }

  /**
   * All-gather with per-rank sizes, in bytes: rank r's {@code recvBytes[r]} bytes land at byte
   * {@code recvDispls[r]} of {@code recv}. Every rank passes the same {@code recvBytes} ({@code
   * recvDispls} is this rank's own layout); this rank sends {@code recvBytes[rank]} bytes from the
   * start of {@code send}.
   */
  public void allGatherV(ArrowBuf send, ArrowBuf recv, long[] recvBytes, long[] recvDispls) {
    checkArguments(
        "allGatherV",
        () -> {
          checkLayout("allGatherV", recv, recvBytes, recvDispls);
          requireCapacity("allGatherV", "send", send, 0, recvBytes[rank]);
        });
    call(
        "allGatherV",
        () ->
            NativeCore.npg_all_gather_v(
                handle(),
                send.memoryAddress(),
                recvBytes[rank],
                recv.memoryAddress(),
                recvBytes,
                recvDispls,
                UINT8));
  }

  /**
   * {@link #allGatherV} with this rank's bytes already at {@code recvDispls[rank]} of {@code recv}.
   */
  public void allGatherVInPlace(ArrowBuf recv, long[] recvBytes, long[] recvDispls) {
    checkArguments(
        "allGatherVInPlace", () -> checkLayout("allGatherVInPlace", recv, recvBytes, recvDispls));
    long own = recv.memoryAddress() + recvDispls[rank];
    call(
        "allGatherVInPlace",
        () ->
            NativeCore.npg_all_gather_v(
                handle(),
                own,
                recvBytes[rank],
                recv.memoryAddress(),
                recvBytes,
                recvDispls,
                UINT8));
  }

  /**
   * {@link #allGatherV} for a block spread over several buffers: this rank's bytes are the
   * concatenation of the segments {@code (sendAddresses[i], sendLengths[i])} and go out straight
   * from them; this rank's own region of {@code recv} is left untouched (the caller serves its own
   * block from its input buffers) and needs no room for it: {@code recvDispls[rank]} is ignored,
   * and {@code recv} may be null when no other rank sends anything.
   */
  public void allGatherVSegments(
      long[] sendAddresses,
      long[] sendLengths,
      ArrowBuf recv,
      long[] recvBytes,
      long[] recvDispls) {
    String op = "allGatherVSegments";
    checkArguments(
        op,
        () -> {
          Objects.requireNonNull(sendAddresses, () -> where(op) + ": sendAddresses is null");
          Objects.requireNonNull(sendLengths, () -> where(op) + ": sendLengths is null");
          if (sendAddresses.length != sendLengths.length) {
            throw new IllegalArgumentException(
                where(op)
                    + ": sendAddresses has "
                    + sendAddresses.length
                    + " entries but sendLengths "
                    + sendLengths.length
                    + "; allowed: the same count");
          }
          checkLayoutCounts(op, recvBytes, recvDispls);
          for (int r = 0; r < rankSize; r++) {
            if (r != rank && recvBytes[r] > 0) {
              requireCapacity(op, "recv", recv, recvDispls[r], recvBytes[r]);
            }
          }
        });
    long[] segments = new long[2 * sendAddresses.length];
    for (int i = 0; i < sendAddresses.length; i++) {
      segments[2 * i] = sendAddresses[i];
      segments[2 * i + 1] = sendLengths[i];
    }
    long recvAddress = recv == null ? 0 : recv.memoryAddress();
    call(
        "allGatherVSegments",
        () ->
            NativeCore.npg_all_gather_v_segments(
                handle(), segments, sendAddresses.length, recvAddress, recvBytes, recvDispls));
  }

  /**
   * Makes a blocked or later collective on this communicator fail with {@link ResultCode#ABORTED}.
   * Safe from any thread while the communicator is open.
   */
  public void abort() {
    synchronized (lock) {
      if (handle == null) {
        throw new IllegalStateException("Communicator rank " + rank + " is already closed");
      }
      NativeStatus.check(NativeCore.npg_comm_abort(handle), "abort", rank);
    }
  }

  /**
   * Releases the native communicator. A collective still running on another thread is aborted
   * first. Closing twice is an error.
   */
  @Override
  public void close() {
    synchronized (lock) {
      if (handle == null) {
        throw new IllegalStateException("Communicator rank " + rank + " is already closed");
      }
      Pointer closing = handle;
      handle = null;
      if (activeCalls > 0) {
        NativeCore.npg_comm_abort(closing);
        while (activeCalls > 0) {
          try {
            lock.wait();
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
        }
      }
      NativeStatus.check(NativeCore.npg_comm_destroy(closing), "close", rank);
    }
  }

  /** True until {@link #close()}. */
  public boolean isOpen() {
    synchronized (lock) {
      return handle != null;
    }
  }

  private interface NativeCall {
    int run();
  }

  private void call(String operation, NativeCall nativeCall) {
    synchronized (lock) {
      handle();
      activeCalls++;
    }
    int rc;
    try {
      rc = nativeCall.run();
    } finally {
      synchronized (lock) {
        activeCalls--;
        lock.notifyAll();
      }
    }
    NativeStatus.check(rc, operation, rank);
  }

  private Pointer handle() {
    synchronized (lock) {
      if (handle == null) {
        throw new IllegalStateException("Communicator rank " + rank + " is closed");
      }
      return handle;
    }
  }

  /**
   * Runs this rank's argument checks for the collective {@code op}. When one fails on a
   * communicator of several ranks, the peers, which are in or about to enter the same collective,
   * are told ({@code npg_comm_reject}): with backend host every rank then fails at once with the
   * same {@link ResultCode#INVALID_USAGE} naming this rank and the check's text, instead of the
   * peers waiting for the timeout. Where they cannot be told (one rank, a device backend, a
   * communicator already aborted or broken), the check's own exception is thrown.
   */
  private void checkArguments(String op, Runnable checks) {
    try {
      checks.run();
    } catch (IllegalArgumentException | NullPointerException local) {
      if (rankSize == 1 || !isOpen()) {
        throw local;
      }
      try {
        call(op, () -> NativeCore.npg_comm_reject(handle(), local.getMessage()));
      } catch (NpuGatherException shared) {
        if (shared.code() == ResultCode.INVALID_USAGE) {
          shared.addSuppressed(local);
          throw shared;
        }
        local.addSuppressed(shared);
      } catch (IllegalStateException closed) {
        local.addSuppressed(closed);
      }
      throw local;
    }
  }

  /** {@code op(rank r/n)}, as the native library names the operation and rank in its errors. */
  private String where(String op) {
    return op + "(rank " + rank + "/" + rankSize + ")";
  }

  private void checkLayout(String op, ArrowBuf recv, long[] recvBytes, long[] recvDispls) {
    checkLayoutCounts(op, recvBytes, recvDispls);
    for (int r = 0; r < rankSize; r++) {
      requireCapacity(op, "recv", recv, recvDispls[r], recvBytes[r]);
    }
  }

  private void checkLayoutCounts(String op, long[] recvBytes, long[] recvDispls) {
    Objects.requireNonNull(recvBytes, () -> where(op) + ": recvBytes is null");
    Objects.requireNonNull(recvDispls, () -> where(op) + ": recvDispls is null");
    if (recvBytes.length != rankSize || recvDispls.length != rankSize) {
      throw new IllegalArgumentException(
          where(op)
              + ": recvBytes has "
              + recvBytes.length
              + " and recvDispls "
              + recvDispls.length
              + " entries; allowed: rankSize ("
              + rankSize
              + ") each");
    }
    for (int r = 0; r < rankSize; r++) {
      if (recvBytes[r] < 0 || recvDispls[r] < 0 || recvDispls[r] > Long.MAX_VALUE - recvBytes[r]) {
        throw new IllegalArgumentException(
            where(op)
                + ": recvBytes["
                + r
                + "] = "
                + recvBytes[r]
                + ", recvDispls["
                + r
                + "] = "
                + recvDispls[r]
                + "; allowed: both >= 0 and their sum at most "
                + Long.MAX_VALUE);
      }
    }
  }

  /** Bytes of {@code count} elements; the whole gather's bytes must fit in a long too. */
  private long checkedBytes(String op, long count, DType dtype) {
    Objects.requireNonNull(dtype, () -> where(op) + ": dtype is null");
    long most = Long.MAX_VALUE / dtype.byteWidth() / rankSize;
    if (count < 0 || count > most) {
      throw new IllegalArgumentException(
          where(op)
              + ": count = "
              + count
              + " "
              + dtype
              + " elements; allowed: 0 to "
              + most
              + " (the "
              + rankSize
              + " ranks' blocks together at most "
              + Long.MAX_VALUE
              + " bytes)");
    }
    return count * dtype.byteWidth();
  }

  private void requireCapacity(String op, String name, ArrowBuf buf, long offset, long bytes) {
    Objects.requireNonNull(buf, () -> where(op) + ": " + name + " is null");
    if (offset + bytes > buf.capacity()) {
      throw new IllegalArgumentException(
          where(op)
              + ": "
              + name
              + " has a capacity of "
              + buf.capacity()
              + " bytes; allowed: at least "
              + (offset + bytes)
              + " bytes (bytes ["
              + offset
              + ", "
              + (offset + bytes)
              + ") are used)");
    }
  }

  @Override
  public String toString() {
    return "Communicator{rank " + rank + "/" + rankSize + ", " + backend + ", " + transport + "}";
  }
}
