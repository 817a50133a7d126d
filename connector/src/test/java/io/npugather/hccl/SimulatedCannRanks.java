package io.npugather.hccl;

import io.npugather.AllGatherParam;
import io.npugather.CommMode;
import io.npugather.Communicator;
import io.npugather.CommunicatorOptions;
import io.npugather.DType;
import io.npugather.ResultCode;
import io.npugather.RootInfo;
import io.npugather.VendorException;
import java.time.Duration;
import java.util.Random;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;

/**
 * Child-JVM program of {@link CommunicatorOverSimulatedCannTest}: ranks as threads, each on its
 * own simulated device, through the public operator API with backend "hccl" (never an NPU).
 *
 * <p>Argument: {@code gather} (all-gather random data, check every byte), {@code failRank1}
 * (the runtime was started with rank 1's collectives failing: rank 1 must get a {@link
 * VendorException} HCCL_E_INTERNAL with SYSTEM_ERROR, the others ACL's
 * ACL_ERROR_RT_SUSPECT_REMOTE_ERROR with REMOTE_ERROR) or {@code initFail11} (the runtime fails
 * every init with HcclResult 11: every rank gets HCCL_E_TCP_CONNECT). Prints "N passed, N failed"
 * last.
 */
public final class SimulatedCannRanks {
  private static final int RANKS = 3;
  private static final int BYTES = 65_537;

  private SimulatedCannRanks() {}

  private static byte[] data(int rank) {
    byte[] b = new byte[BYTES];
    new Random(1234L + rank).nextBytes(b);
    return b;
  }

  private static void rank(int r, RootInfo rootInfo, BufferAllocator allocator, String mode) {
    AllGatherParam param = AllGatherParam.builder().backend("hccl").rank(r).rankSize(RANKS)
        .commMode(CommMode.COMM_MULTI_THREAD).build();
    CommunicatorOptions options =
        CommunicatorOptions.defaults().withTimeout(Duration.ofSeconds(20)).withDeviceId(r);
    if (mode.equals("initFail11")) {
      try (Communicator comm = Communicator.create(param, rootInfo, options)) {
        throw new IllegalStateException("rank " + r + ": the injected init failure did not surface");
      } catch (VendorException e) {
        expectVendor(e, r, "create", ResultCode.REMOTE_ERROR, "HCCL", 11, "HCCL_E_TCP_CONNECT");
        return;
      }
    }
    try (Communicator comm = Communicator.create(param, rootInfo, options);
        ArrowBuf send = allocator.buffer(BYTES);
        ArrowBuf recv = allocator.buffer((long) BYTES * RANKS)) {
      if (!comm.transport().equals("hccl")) {
        throw new IllegalStateException("transport " + comm.transport());
      }
      send.setBytes(0, data(r));
      try {
        comm.allGather(send, recv, BYTES, DType.INT8);
      } catch (VendorException e) {
        if (mode.equals("failRank1") && r == 1) {
          expectVendor(e, r, "allGather", ResultCode.SYSTEM_ERROR, "HCCL", 4, "HCCL_E_INTERNAL");
          return;
        }
        if (mode.equals("failRank1")) {
          expectVendor(e, r, "allGather", ResultCode.REMOTE_ERROR, "ACL", 507057,
              "ACL_ERROR_RT_SUSPECT_REMOTE_ERROR");
          return;
        }
        throw e;
      }
      if (mode.equals("failRank1")) {
        throw new IllegalStateException("rank " + r + ": the injected failure did not surface");
      }
      for (int p = 0; p < RANKS; p++) {
        byte[] got = new byte[BYTES];
        recv.getBytes((long) p * BYTES, got);
        if (!java.util.Arrays.equals(got, data(p))) {
          throw new IllegalStateException("rank " + r + ": block of rank " + p + " differs");
        }
      }
    }
  }

  private static void expectVendor(VendorException e, int rank, String operation, ResultCode code,
      String library, long vendorCode, String codeName) {
    String got = e.code() + " " + e.operation() + " rank " + e.rank() + " " + e.library() + " "
        + e.vendorCode() + " " + e.vendorCodeName();
    String want = code + " " + operation + " rank " + rank + " " + library + " " + vendorCode + " "
        + codeName;
    if (!got.equals(want) || !e.getMessage().contains(codeName)) {
      throw new IllegalStateException("rank " + rank + ": got " + got + ", expected " + want, e);
    }
  }

  /** The simulated runtime names its shared memory /npgfake-<pid>-...: none may stay behind. */
  private static Throwable leftoverSharedMemory() throws java.io.IOException {
    String prefix = "npgfake-" + ProcessHandle.current().pid() + "-";
    try (java.util.stream.Stream<java.nio.file.Path> files =
        java.nio.file.Files.list(java.nio.file.Path.of("/dev/shm"))) {
      return files.map(f -> f.getFileName().toString()).filter(n -> n.startsWith(prefix))
          .findFirst().map(n -> new IllegalStateException("left behind: /dev/shm/" + n))
          .orElse(null);
    }
  }

  public static void main(String[] args) throws Exception {
    String mode = args[0];
    String name = "communicator_api_over_simulated_cann_" + mode;
    int failed = 0;
    try (BufferAllocator allocator = new RootAllocator()) {
      RootInfo rootInfo = Communicator.createRootInfo("hccl", CommunicatorOptions.defaults());
      AtomicReference<Throwable> error = new AtomicReference<>();
      Thread[] threads = new Thread[RANKS];
      for (int r = 0; r < RANKS; r++) {
        final int rank = r;
        threads[r] = new Thread(() -> {
          try {
            rank(rank, rootInfo, allocator, mode);
          } catch (Throwable t) {
            error.compareAndSet(null, t);
          }
        });
        threads[r].start();
      }
      for (Thread t : threads) {
        t.join();
      }
      if (error.get() == null) {
        error.set(leftoverSharedMemory());
      }
      if (error.get() != null) {
        failed++;
        System.out.println("FAIL " + name + ": " + error.get());
      } else {
        System.out.println("PASS " + name);
      }
    }  // closing the allocator fails on any leaked buffer
    System.out.println((1 - failed) + " passed, " + failed + " failed");
    System.exit(failed == 0 ? 0 : 1);
  }
}
