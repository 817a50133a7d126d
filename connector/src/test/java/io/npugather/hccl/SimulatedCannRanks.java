package io.npugather.hccl;

import io.npugather.AllGatherParam;
import io.npugather.CommMode;
import io.npugather.Communicator;
import io.npugather.CommunicatorOptions;
import io.npugather.DType;
import io.npugather.NpuGatherException;
import io.npugather.ResultCode;
import io.npugather.RootInfo;
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
 * <p>Argument: {@code gather} (all-gather random data, check every byte) or {@code failRank1}
 * (the runtime was started with rank 1's collectives failing: rank 1 must get SYSTEM_ERROR, the
 * others REMOTE_ERROR). Prints "N passed, N failed" last.
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
    try (Communicator comm = Communicator.create(param, rootInfo, options);
        ArrowBuf send = allocator.buffer(BYTES);
        ArrowBuf recv = allocator.buffer((long) BYTES * RANKS)) {
      if (!comm.transport().equals("hccl")) {
        throw new IllegalStateException("transport " + comm.transport());
      }
      send.setBytes(0, data(r));
      try {
        comm.allGather(send, recv, BYTES, DType.INT8);
      } catch (NpuGatherException e) {
        ResultCode expected = r == 1 ? ResultCode.SYSTEM_ERROR : ResultCode.REMOTE_ERROR;
        if (mode.equals("failRank1") && e.code() == expected && e.rank() == r) {
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
