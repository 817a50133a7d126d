package io.npugather;

import io.npugather.CommunicatorOptions.HostTransport;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;

/**
 * One rank as its own JVM, for the multi-process tests. The root rank publishes its root info as a
 * file in the rendezvous folder; the others wait for it.
 *
 * <p>Arguments: folder rank rankSize commDomain transport bytesPerRank seed timeoutMs mode, where
 * mode is {@code gather} (gather random data and check every byte), {@code stall} (join, say READY,
 * then never enter the collective), {@code leave} (join, say READY, close the communicator, say
 * LEFT, then live on without it until killed) or {@code operator-reject} (the operator on int32[2,
 * 2], except that rank 1 passes int32[] with 0 dims). Prints {@code OK <transport>} or {@code
 * FAILED <code> <message>} and exits 0 or 1.
 */
public final class RankProcess {
  private RankProcess() {}

  public static void main(String[] args) throws Exception {
    Path folder = Path.of(args[0]);
    int rank = Integer.parseInt(args[1]);
    int rankSize = Integer.parseInt(args[2]);
    String domain = args[3];
    HostTransport transport = HostTransport.valueOf(args[4]);
    int bytes = Integer.parseInt(args[5]);
    long seed = Long.parseLong(args[6]);
    Duration timeout = Duration.ofMillis(Long.parseLong(args[7]));
    String mode = args[8];

    CommunicatorOptions options =
        CommunicatorOptions.defaults().withTimeout(timeout).withHostTransport(transport);
    AllGatherParam param =
        AllGatherParam.builder()
            .backend("host")
            .rank(rank)
            .rankSize(rankSize)
            .commDomain(domain)
            .build();
    try (BufferAllocator allocator = new RootAllocator()) {
      RootInfo rootInfo = rank == 0 ? publish(folder, options) : await(folder, timeout);
      if (mode.equals("leave")) {
        Communicator comm = Communicator.create(param, rootInfo, options);
        System.out.println("READY " + comm.transport());
        comm.close();
        System.out.println("LEFT");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
      }
      try (Communicator comm = Communicator.create(param, rootInfo, options)) {
        System.out.println("READY " + comm.transport());
        System.out.flush();
        if (mode.equals("stall")) {
          Thread.sleep(Long.MAX_VALUE);
        }
        if (mode.equals("operator-reject")) {
          try (Tensor x =
                  Tensor.allocate(
                      allocator, DType.INT32, rank == 1 ? new long[0] : new long[] {2, 2});
              Tensor out = new AllGatherOperation(param).execute(comm, x, allocator)) {
            System.out.println("OK gathered " + out);
          }
          return;
        }
        try (ArrowBuf send = allocator.buffer(bytes);
            ArrowBuf recv = allocator.buffer((long) bytes * rankSize)) {
          TestData.fill(send, 0, TestData.bytes(seed, rank, bytes));
          comm.allGather(send, recv, bytes, DType.INT8);
          for (int r = 0; r < rankSize; r++) {
            long at =
                TestData.firstMismatch(recv, (long) r * bytes, TestData.bytes(seed, r, bytes));
            if (at >= 0) {
              System.out.println("FAILED WRONG_BYTES block of rank " + r + " differs at " + at);
              System.exit(1);
            }
          }
        }
        System.out.println("OK " + comm.transport());
      }
    } catch (NpuGatherException e) {
      System.out.println("FAILED " + e.code() + " " + e.getMessage());
      System.exit(1);
    }
  }

  private static RootInfo publish(Path folder, CommunicatorOptions options) throws Exception {
    RootInfo rootInfo = Communicator.createRootInfo("host", options);
    Path partial = folder.resolve("root-info.partial");
    Files.writeString(partial, rootInfo.encode(), StandardCharsets.US_ASCII);
    Files.move(partial, folder.resolve("root-info"), StandardCopyOption.ATOMIC_MOVE);
    return rootInfo;
  }

  private static RootInfo await(Path folder, Duration timeout) throws Exception {
    Path file = folder.resolve("root-info");
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!Files.exists(file)) {
      if (System.nanoTime() > deadline) {
        throw new NpuGatherException(
            ResultCode.TIMEOUT,
            "await root info",
            -1,
            "no root info in " + folder + " after " + timeout);
      }
      Thread.sleep(10);
    }
    return RootInfo.decode(Files.readString(file, StandardCharsets.US_ASCII));
  }
}
