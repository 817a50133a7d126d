package io.npugather.cann;

import io.npugather.AllGatherOperation;
import io.npugather.AllGatherParam;
import io.npugather.CommMode;
import io.npugather.Communicator;
import io.npugather.CommunicatorOptions;
import io.npugather.DType;
import io.npugather.ResultCode;
import io.npugather.RootInfo;
import io.npugather.Tensor;
import io.npugather.VendorException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.Arrays;
import java.util.Random;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Stream;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;

/**
 * Child-JVM program of {@link CommunicatorOverSimulatedCannTest}: ranks of a device backend ("hccl"
 * or "lccl"), each on its own simulated device, through the public operator API over the simulated
 * CANN runtime (never an NPU).
 *
 * <p>Arguments: {@code BACKENDS MODE [RANK RANKS RENDEZVOUS]}, BACKENDS comma-separated (one for
 * {@code process}), each run in turn. Modes: {@code threads} (3 rank threads run the operator
 * matrix: every dtype and several shapes through AllGatherOperation, ragged allGatherV, segmented
 * sends; every byte checked), {@code failRank1} (the runtime fails rank 1's collectives: rank 1
 * gets the backend's VendorException with SYSTEM_ERROR, the others ACL's
 * ACL_ERROR_RT_SUSPECT_REMOTE_ERROR with REMOTE_ERROR), {@code initFail} (the runtime fails every
 * init with the code the test set: every rank gets its VendorException), {@code process} (this JVM
 * is rank RANK of RANKS and runs the matrix; hccl takes the root info from the file RENDEZVOUS that
 * rank 0 writes, lccl meets on the commDomain RENDEZVOUS). Prints "N passed, N failed" last.
 */
public final class SimulatedCannRanks {
  private static final int THREAD_RANKS = 3;
  private static final long[][] SHAPES = {{1}, {3, 5}, {2, 3, 4}, {70_001}};

  private SimulatedCannRanks() {}

  private static CommunicatorOptions options(int rank) {
    return CommunicatorOptions.defaults().withTimeout(Duration.ofSeconds(20)).withDeviceId(rank);
  }

  private static void fill(ArrowBuf buf, long bytes, long seed) {
    byte[] b = new byte[(int) bytes];
    new Random(seed).nextBytes(b);
    buf.setBytes(0, b);
  }

  private static void expectBytes(ArrowBuf buf, long offset, long bytes, long seed, String what) {
    byte[] want = new byte[(int) bytes];
    new Random(seed).nextBytes(want);
    byte[] got = new byte[(int) bytes];
    buf.getBytes(offset, got);
    if (!Arrays.equals(got, want)) {
      throw new IllegalStateException(what + " differs");
    }
  }

  /** Every dtype and shape through the operator, ragged all-gather-v and segmented sends. */
  private static void matrix(Communicator comm, BufferAllocator allocator) {
    int r = comm.rank();
    int n = comm.rankSize();
    AllGatherOperation op =
        new AllGatherOperation(
            AllGatherParam.builder().backend(comm.backend()).rank(r).rankSize(n).build());
    long seed = 1;
    for (DType dtype : DType.values()) {
      for (long[] shape : SHAPES) {
        seed++;
        try (Tensor x = Tensor.allocate(allocator, dtype, shape)) {
          fill(x.buffer(), x.byteSize(), seed * 100 + r);
          try (Tensor out = op.execute(comm, x, allocator)) {
            for (int p = 0; p < n; p++) {
              expectBytes(
                  out.buffer(),
                  p * x.byteSize(),
                  x.byteSize(),
                  seed * 100 + p,
                  "rank " + r + ": " + dtype + Arrays.toString(shape) + " block of rank " + p);
            }
          }
        }
      }
    }
    long[] counts = new long[n];
    long[] displs = new long[n];
    long total = 0;
    for (int p = 0; p < n; p++) {
      counts[p] = p == 1 ? 0 : 10_000L * (p + 1) + 13; // one empty block, the others ragged
      displs[p] = total;
      total += counts[p];
    }
    try (ArrowBuf send = allocator.buffer(Math.max(1, counts[r]));
        ArrowBuf recv = allocator.buffer(total)) {
      fill(send, counts[r], 7_000 + r);
      comm.allGatherV(send, recv, counts, displs);
      for (int p = 0; p < n; p++) {
        expectBytes(
            recv, displs[p], counts[p], 7_000 + p, "rank " + r + ": allGatherV block of rank " + p);
      }
      recv.setZero(0, total);
      long half = counts[r] / 2;
      comm.allGatherVSegments(
          new long[] {send.memoryAddress(), send.memoryAddress() + half},
          new long[] {half, counts[r] - half},
          recv,
          counts,
          displs);
      for (int p = 0; p < n; p++) {
        if (p != r) {
          expectBytes(
              recv, displs[p], counts[p], 7_000 + p, "rank " + r + ": segments of rank " + p);
        }
      }
    }
  }

  private static void expectVendor(
      VendorException e,
      int rank,
      String operation,
      ResultCode code,
      String library,
      long vendorCode,
      String codeName) {
    String got =
        e.code()
            + " "
            + e.operation()
            + " rank "
            + e.rank()
            + " "
            + e.library()
            + " "
            + e.vendorCode()
            + " "
            + e.vendorCodeName();
    String want =
        code
            + " "
            + operation
            + " rank "
            + rank
            + " "
            + library
            + " "
            + vendorCode
            + " "
            + codeName;
    if (!got.equals(want) || !e.getMessage().contains(codeName)) {
      throw new IllegalStateException("rank " + rank + ": got " + got + ", expected " + want, e);
    }
  }

  private static void threadRank(
      String backend, String mode, int r, RootInfo rootInfo, BufferAllocator allocator) {
    AllGatherParam param =
        AllGatherParam.builder()
            .backend(backend)
            .rank(r)
            .rankSize(THREAD_RANKS)
            .commMode(CommMode.COMM_MULTI_THREAD)
            .build();
    boolean hccl = backend.equals("hccl");
    if (mode.equals("initFail")) {
      try (Communicator comm = Communicator.create(param, rootInfo, options(r))) {
        throw new IllegalStateException(
            "rank " + r + ": the injected init failure did not surface");
      } catch (VendorException e) {
        if (hccl) {
          expectVendor(e, r, "create", ResultCode.REMOTE_ERROR, "HCCL", 11, "HCCL_E_TCP_CONNECT");
        } else {
          expectVendor(e, r, "create", ResultCode.TIMEOUT, "LCAL", -5, "LCAL_ERROR_TIMEOUT");
        }
        return;
      }
    }
    try (Communicator comm = Communicator.create(param, rootInfo, options(r))) {
      if (!comm.transport().equals(backend)) {
        throw new IllegalStateException("transport " + comm.transport());
      }
      if (mode.equals("threads")) {
        matrix(comm, allocator);
        return;
      }
      try (ArrowBuf send = allocator.buffer(64);
          ArrowBuf recv = allocator.buffer(64L * THREAD_RANKS)) {
        comm.allGather(send, recv, 64, DType.INT8);
        throw new IllegalStateException("rank " + r + ": the injected failure did not surface");
      } catch (VendorException e) {
        if (r != 1) {
          expectVendor(
              e,
              r,
              "allGather",
              ResultCode.REMOTE_ERROR,
              "ACL",
              507057,
              "ACL_ERROR_RT_SUSPECT_REMOTE_ERROR");
        } else if (hccl) {
          expectVendor(e, r, "allGather", ResultCode.SYSTEM_ERROR, "HCCL", 4, "HCCL_E_INTERNAL");
        } else {
          expectVendor(
              e, r, "allGather", ResultCode.SYSTEM_ERROR, "LCAL", -4, "LCAL_ERROR_INTERNAL");
        }
      }
    }
  }

  private static void threads(String backend, String mode, BufferAllocator allocator)
      throws Exception {
    RootInfo rootInfo = Communicator.createRootInfo(backend, CommunicatorOptions.defaults());
    AtomicReference<Throwable> error = new AtomicReference<>();
    Thread[] threads = new Thread[THREAD_RANKS];
    for (int r = 0; r < THREAD_RANKS; r++) {
      final int rank = r;
      threads[r] =
          new Thread(
              () -> {
                try {
                  threadRank(backend, mode, rank, rootInfo, allocator);
                } catch (Throwable t) {
                  error.compareAndSet(null, t);
                }
              });
      threads[r].start();
    }
    for (Thread t : threads) {
      t.join();
    }
    if (error.get() != null) {
      throw new IllegalStateException(error.get().toString(), error.get());
    }
  }

  /** One rank of a multi-process group: hccl meets through a root info file, lccl on a domain. */
  private static void process(
      String backend, int r, int n, String rendezvous, BufferAllocator allocator) throws Exception {
    AllGatherParam.Builder param =
        AllGatherParam.builder()
            .backend(backend)
            .rank(r)
            .rankSize(n)
            .commMode(CommMode.COMM_MULTI_PROCESS);
    RootInfo rootInfo = null;
    if (backend.equals("hccl")) {
      Path file = Path.of(rendezvous);
      if (r == 0) {
        rootInfo = Communicator.createRootInfo(backend, options(r));
        Path partial = Path.of(rendezvous + ".partial");
        Files.write(partial, rootInfo.toBytes());
        Files.move(partial, file, StandardCopyOption.ATOMIC_MOVE);
      } else {
        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        while (!Files.exists(file) && System.nanoTime() < deadline) {
          Thread.sleep(10);
        }
        rootInfo = RootInfo.of(backend, Files.readAllBytes(file));
      }
    } else {
      param.commDomain(rendezvous);
    }
    try (Communicator comm = Communicator.create(param.build(), rootInfo, options(r))) {
      matrix(comm, allocator);
    }
  }

  /** The simulated runtime names its shared memory /npgfake-<pid>-...: none may stay behind. */
  private static void expectNoLeftoverSharedMemory() throws IOException {
    String prefix = "npgfake-" + ProcessHandle.current().pid() + "-";
    try (Stream<Path> files = Files.list(Path.of("/dev/shm"))) {
      files
          .map(f -> f.getFileName().toString())
          .filter(name -> name.startsWith(prefix))
          .findFirst()
          .ifPresent(
              name -> {
                throw new IllegalStateException("left behind: /dev/shm/" + name);
              });
    }
  }

  public static void main(String[] args) throws Exception {
    String backends = args[0];
    String mode = args[1];
    String name =
        "communicator_api_"
            + backends.replace(',', '_')
            + "_over_simulated_cann_"
            + mode
            + (mode.equals("process") ? "_rank_" + args[2] : "");
    int failed = 0;
    try (BufferAllocator allocator = new RootAllocator()) {
      if (mode.equals("process")) {
        process(backends, Integer.parseInt(args[2]), Integer.parseInt(args[3]), args[4], allocator);
      } else {
        for (String backend : backends.split(",")) {
          threads(backend, mode, allocator);
        }
      }
      expectNoLeftoverSharedMemory();
      System.out.println("PASS " + name);
    } catch (Throwable t) { // closing the allocator above fails on any leaked buffer
      failed++;
      System.out.println("FAIL " + name + ": " + t);
      t.printStackTrace(System.out);
    }
    System.out.println((1 - failed) + " passed, " + failed + " failed");
    System.exit(failed == 0 ? 0 : 1);
  }
}
