package io.npugather;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.CommunicatorOptions.HostTransport;
import java.net.ConnectException;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** The communicator's collectives, transports and failure behaviour, ranks as threads. */
class CommunicatorTest {
  private static final Duration TIMEOUT = Duration.ofSeconds(20);

  private BufferAllocator allocator;

  @BeforeEach
  void openAllocator() {
    allocator = new RootAllocator();
  }

  @AfterEach
  void closeAllocatorWithNothingOutstanding() {
    allocator.close();
  }

  private static CommunicatorOptions options(HostTransport transport) {
    return CommunicatorOptions.defaults().withTimeout(TIMEOUT).withHostTransport(transport);
  }

  /** Rank r sends sizes[r] bytes; blocks are laid out with a gap before each. */
  private List<String> gatherRagged(
      int rankSize, HostTransport transport, long[] sizes, boolean inPlace, long seed)
      throws Exception {
    long[] displs = new long[rankSize];
    long end = 0;
    for (int r = 0; r < rankSize; r++) {
      displs[r] = end + 3;
      end = displs[r] + sizes[r];
    }
    long total = end;
    return Ranks.values(
        Ranks.run(
            Ranks.hostParam(rankSize),
            options(transport),
            (rank, comm) -> {
              byte[] mine = TestData.bytes(seed, rank, (int) sizes[rank]);
              try (ArrowBuf send = allocator.buffer(Math.max(1, sizes[rank]));
                  ArrowBuf recv = allocator.buffer(Math.max(1, total))) {
                recv.setZero(0, recv.capacity());
                if (inPlace) {
                  TestData.fill(recv, displs[rank], mine);
                  comm.allGatherVInPlace(recv, sizes, displs);
                } else {
                  TestData.fill(send, 0, mine);
                  comm.allGatherV(send, recv, sizes, displs);
                }
                for (int r = 0; r < rankSize; r++) {
                  long at =
                      TestData.firstMismatch(
                          recv, displs[r], TestData.bytes(seed, r, (int) sizes[r]));
                  assertEquals(
                      -1, at, "rank " + rank + ": block of rank " + r + " differs at " + at);
                  for (long gap = displs[r] - 3; gap < displs[r]; gap++) {
                    assertEquals(
                        0, recv.getByte(gap), "rank " + rank + ": gap byte " + gap + " written");
                  }
                }
                return comm.transport();
              }
            }));
  }

  @ParameterizedTest(name = "{0} ranks over {1}, in place {2}")
  @CsvSource({
    "2, AUTO, false",
    "3, AUTO, true",
    "4, AUTO, false",
    "8, AUTO, true",
    "2, TCP, false",
    "3, TCP, true",
    "4, TCP, false",
    "2, STAGING, false",
    "3, STAGING, true"
  })
  void raggedBlocksIncludingEmptyOnesLandAtTheirDisplacements(
      int rankSize, HostTransport transport, boolean inPlace) throws Exception {
    long[] sizes = new long[rankSize];
    for (int r = 0; r < rankSize; r++) {
      sizes[r] = r == 1 ? 0 : 1000L * (r + 1) * (r + 1) + r;
    }
    List<String> transports = gatherRagged(rankSize, transport, sizes, inPlace, 42 + rankSize);
    String expected =
        switch (transport) {
          case AUTO -> "threads";
          case TCP -> "tcp";
          case STAGING -> "staging";
        };
    for (String used : transports) {
      assertEquals(expected, used);
    }
  }

  @ParameterizedTest(name = "{0} ranks over {1}")
  @CsvSource({"2, TCP", "3, TCP", "2, STAGING", "3, AUTO"})
  void largeSkewedBlocksArriveIntact(int rankSize, HostTransport transport) throws Exception {
    long[] sizes = new long[rankSize];
    sizes[0] = 12L << 20;
    for (int r = 1; r < rankSize; r++) {
      sizes[r] = (5L << 20) + 12345 * r;
    }
    gatherRagged(rankSize, transport, sizes, false, 7);
  }

  @ParameterizedTest(name = "{0} ranks over {1}")
  @CsvSource({"1, AUTO", "3, AUTO", "3, TCP", "2, STAGING"})
  void segmentedSendsArriveAndNeedNoRoomForTheOwnBlock(int rankSize, HostTransport transport)
      throws Exception {
    long[] sizes = new long[rankSize];
    for (int r = 0; r < rankSize; r++) {
      sizes[r] = 7000L * (r + 1) + 3;
    }
    Ranks.values(
        Ranks.run(
            Ranks.hostParam(rankSize),
            options(transport),
            (rank, comm) -> {
              // Each rank's own block is left out of its receive layout.
              long[] displs = new long[rankSize];
              long end = 0;
              for (int r = 0; r < rankSize; r++) {
                displs[r] = r == rank ? 0 : end;
                end += r == rank ? 0 : sizes[r];
              }
              byte[] mine = TestData.bytes(31, rank, (int) sizes[rank]);
              int head = 100;
              try (ArrowBuf first = allocator.buffer(head);
                  ArrowBuf second = allocator.buffer(sizes[rank] - head);
                  ArrowBuf recv = end == 0 ? null : allocator.buffer(end)) {
                first.setBytes(0, mine, 0, head);
                second.setBytes(0, mine, head, mine.length - head);
                comm.allGatherVSegments(
                    new long[] {first.memoryAddress(), second.memoryAddress()},
                    new long[] {head, sizes[rank] - head},
                    recv,
                    sizes,
                    displs);
                for (int r = 0; r < rankSize; r++) {
                  if (r != rank) {
                    assertEquals(
                        -1,
                        TestData.firstMismatch(
                            recv, displs[r], TestData.bytes(31, r, (int) sizes[r])),
                        "rank " + rank + ": block of rank " + r);
                  }
                }
              }
              return null;
            }));
  }

  @Test
  void oneRankGathersItself() throws Exception {
    List<String> transports = gatherRagged(1, HostTransport.AUTO, new long[] {4096}, false, 1);
    assertEquals(List.of("self"), transports);
  }

  @Test
  void equalSizedAllGatherInPlaceKeepsOwnSlot() throws Exception {
    int rankSize = 3;
    int bytes = 4 * 1000;
    Ranks.values(
        Ranks.run(
            Ranks.hostParam(rankSize),
            options(HostTransport.AUTO),
            (rank, comm) -> {
              try (ArrowBuf recv = allocator.buffer((long) bytes * rankSize)) {
                TestData.fill(recv, (long) rank * bytes, TestData.bytes(5, rank, bytes));
                comm.allGatherInPlace(recv, bytes / 4, DType.FLOAT32);
                for (int r = 0; r < rankSize; r++) {
                  assertEquals(
                      -1,
                      TestData.firstMismatch(recv, (long) r * bytes, TestData.bytes(5, r, bytes)));
                }
                return null;
              }
            }));
  }

  @Test
  void ranksDisagreeingOnCountsAllGetInvalidUsage() throws Exception {
    var outcomes =
        Ranks.run(
            Ranks.hostParam(2),
            options(HostTransport.AUTO),
            (rank, comm) -> {
              long[] sizes = rank == 0 ? new long[] {8, 8} : new long[] {8, 16};
              try (ArrowBuf send = allocator.buffer(16);
                  ArrowBuf recv = allocator.buffer(32)) {
                comm.allGatherV(send, recv, sizes, new long[] {0, 8});
                return "no error";
              }
            });
    for (var outcome : outcomes) {
      NpuGatherException e =
          assertInstanceOf(
              NpuGatherException.class,
              outcome.error(),
              "rank " + outcome.rank() + " returned " + outcome.value());
      assertEquals(ResultCode.INVALID_USAGE, e.code(), e.getMessage());
    }
  }

  /** One collective call of a rank: {@code bad} on rank 0, good arguments on rank 1. */
  private interface Call {
    void run(Communicator comm, ArrowBuf send, ArrowBuf recv, ArrowBuf small, boolean bad);
  }

  /**
   * Rank 0's arguments fail its own checks while rank 1 passes good ones: both fail with the same
   * INVALID_USAGE (after each rank's "operation(rank r/n): " context), long before the 60 s
   * timeout, and the communicator still gathers afterwards. Returns the shared text.
   */
  private String rankZeroRejects(Call call) throws Exception {
    CommunicatorOptions options =
        CommunicatorOptions.defaults().withTimeout(Duration.ofSeconds(60));
    long start = System.nanoTime();
    List<String> texts =
        Ranks.values(
            Ranks.run(
                Ranks.hostParam(2),
                options,
                (rank, comm) -> {
                  try (ArrowBuf send = allocator.buffer(64);
                      ArrowBuf recv = allocator.buffer(128);
                      ArrowBuf small = allocator.buffer(64)) {
                    NpuGatherException e =
                        assertThrows(
                            NpuGatherException.class,
                            () -> call.run(comm, send, recv, small, rank == 0));
                    assertEquals(ResultCode.INVALID_USAGE, e.code(), e.getMessage());
                    send.setInt(0, 40 + rank);
                    comm.allGather(send, recv, 16, DType.INT32);
                    assertEquals(40, recv.getInt(0));
                    assertEquals(41, recv.getInt(64));
                    String message = e.getMessage();
                    return message.substring(message.indexOf("): ") + 3);
                  }
                }));
    long ms = (System.nanoTime() - start) / 1_000_000;
    assertTrue(ms < 30_000, "the ranks failed after " + ms + " ms of a 60 s timeout");
    assertEquals(texts.get(0), texts.get(1));
    assertTrue(texts.get(0).startsWith("rank 0 rejected its arguments: "), texts.get(0));
    return texts.get(0);
  }

  @Test
  void dataPathArgumentErrorsNameRankArgumentValueAndWhatIsAllowedOnEveryRankAtOnce()
      throws Exception {
    String small =
        rankZeroRejects(
            (comm, send, recv, tooSmall, bad) ->
                comm.allGather(send, bad ? tooSmall : recv, 16, DType.INT32));
    assertTrue(
        small.contains(
            "allGather(rank 0/2): recv has a capacity of 64 bytes; allowed: "
                + "at least 128 bytes"),
        small);
    String huge =
        rankZeroRejects(
            (comm, send, recv, tooSmall, bad) ->
                comm.allGather(send, recv, bad ? Long.MAX_VALUE / 4 : 16, DType.INT32));
    assertTrue(
        huge.contains(
            "allGather(rank 0/2): count = "
                + Long.MAX_VALUE / 4
                + " int32 elements; allowed: 0 to "
                + Long.MAX_VALUE / 8),
        huge);
    String negative =
        rankZeroRejects(
            (comm, send, recv, tooSmall, bad) ->
                comm.allGatherInPlace(recv, bad ? -1 : 16, DType.INT32));
    assertTrue(
        negative.contains(
            "allGatherInPlace(rank 0/2): count = -1 int32 elements; " + "allowed: 0 to"),
        negative);
    String nullRecv =
        rankZeroRejects(
            (comm, send, recv, tooSmall, bad) ->
                comm.allGather(send, bad ? null : recv, 16, DType.INT32));
    assertTrue(nullRecv.contains("allGather(rank 0/2): recv is null"), nullRecv);
    String layout =
        rankZeroRejects(
            (comm, send, recv, tooSmall, bad) ->
                comm.allGatherV(
                    send, recv, new long[] {8, 8}, new long[] {0, bad ? Long.MAX_VALUE : 8}));
    assertTrue(
        layout.contains(
            "allGatherV(rank 0/2): recvBytes[1] = 8, recvDispls[1] = "
                + Long.MAX_VALUE
                + "; allowed: both >= 0 and their sum at most"),
        layout);
    String entries =
        rankZeroRejects(
            (comm, send, recv, tooSmall, bad) ->
                comm.allGatherV(
                    send,
                    recv,
                    bad ? new long[] {8} : new long[] {8, 8},
                    bad ? new long[] {0} : new long[] {0, 8}));
    assertTrue(
        entries.contains(
            "allGatherV(rank 0/2): recvBytes has 1 and recvDispls 1 "
                + "entries; allowed: rankSize (2) each"),
        entries);
  }

  @Test
  void aSingleRankArgumentErrorIsThrownAtOnceAsItself() throws Exception {
    Ranks.values(
        Ranks.run(
            Ranks.hostParam(1),
            options(HostTransport.AUTO),
            (rank, comm) -> {
              try (ArrowBuf send = allocator.buffer(64);
                  ArrowBuf recv = allocator.buffer(32)) {
                IllegalArgumentException e =
                    assertThrows(
                        IllegalArgumentException.class,
                        () -> comm.allGather(send, recv, 64, DType.INT8));
                assertEquals(
                    "allGather(rank 0/1): recv has a capacity of 32 bytes; allowed: at least "
                        + "64 bytes (bytes [0, 64) are used)",
                    e.getMessage());
              }
              return null;
            }));
  }

  @Test
  void ranksDisagreeingOnRankRootFailAtOnceWithTheSameError() throws Exception {
    // Rank 1 names itself the root: it joins the real root, which refuses its rankRoot at once
    // (either thread may take the root's endpoint first; then the roles swap).
    CommunicatorOptions options =
        CommunicatorOptions.defaults().withTimeout(Duration.ofSeconds(60));
    RootInfo rootInfo = Communicator.createRootInfo("host", options);
    AllGatherParam.Builder template = Ranks.hostParam(2);
    List<AllGatherParam> params =
        List.of(template.rank(0).rankRoot(0).build(), template.rank(1).rankRoot(1).build());
    ExecutorService pool = Executors.newFixedThreadPool(2);
    long start = System.nanoTime();
    try {
      List<Future<NpuGatherException>> futures = new ArrayList<>();
      for (AllGatherParam param : params) {
        futures.add(
            pool.submit(
                () ->
                    assertThrows(
                        NpuGatherException.class,
                        () -> Communicator.create(param, rootInfo, options))));
      }
      List<String> texts = new ArrayList<>();
      for (Future<NpuGatherException> future : futures) {
        NpuGatherException e = future.get(60, TimeUnit.SECONDS);
        assertEquals(ResultCode.INVALID_USAGE, e.code(), e.getMessage());
        texts.add(e.getMessage().substring(e.getMessage().indexOf("): ") + 3));
      }
      long ms = (System.nanoTime() - start) / 1_000_000;
      assertTrue(ms < 30_000, "the ranks failed after " + ms + " ms of a 60 s timeout");
      assertEquals(texts.get(0), texts.get(1));
      assertTrue(
          texts
              .get(0)
              .matches(
                  "rank ([01]) \\(pid \\d+\\) passed rank_root \\1 but root rank "
                      + "([01]) passed rank_root \\2"),
          texts.get(0));
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aRankThatMadeTheRootInfoButNamesAnotherRootFailsEveryRankAtOnce() throws Exception {
    // Rank 0 makes the root info, the root's job, but says rankRoot 1, and rank 1 says rankRoot
    // 0: no rank is the root by its params. Rank 0 serves the root info's endpoint in the root's
    // place and refuses rank 1 when it joins, naming both values, on both ranks at once.
    CommunicatorOptions options =
        CommunicatorOptions.defaults().withTimeout(Duration.ofSeconds(60));
    AllGatherParam.Builder template = Ranks.hostParam(2);
    List<AllGatherParam> params =
        List.of(template.rank(0).rankRoot(1).build(), template.rank(1).rankRoot(0).build());
    CompletableFuture<RootInfo> rootInfo = new CompletableFuture<>();
    ExecutorService pool = Executors.newFixedThreadPool(2);
    long start = System.nanoTime();
    try {
      List<Future<NpuGatherException>> futures = new ArrayList<>();
      for (AllGatherParam param : params) {
        futures.add(
            pool.submit(
                () -> {
                  if (param.rank() == 0) {
                    rootInfo.complete(Communicator.createRootInfo("host", options));
                  }
                  RootInfo info = rootInfo.get(60, TimeUnit.SECONDS);
                  return assertThrows(
                      NpuGatherException.class, () -> Communicator.create(param, info, options));
                }));
      }
      List<String> texts = new ArrayList<>();
      for (Future<NpuGatherException> future : futures) {
        NpuGatherException e = future.get(60, TimeUnit.SECONDS);
        assertEquals(ResultCode.INVALID_USAGE, e.code(), e.getMessage());
        texts.add(e.getMessage().substring(e.getMessage().indexOf("): ") + 3));
      }
      long ms = (System.nanoTime() - start) / 1_000_000;
      assertTrue(ms < 30_000, "the ranks failed after " + ms + " ms of a 60 s timeout");
      assertEquals(texts.get(0), texts.get(1));
      assertTrue(
          texts
              .get(0)
              .matches(
                  "rank 1 \\(pid \\d+\\) passed rank_root 0 but rank 0 \\(pid \\d+\\), which"
                      + " made the root info, passed rank_root 1"),
          texts.get(0));
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void createRootInfoWithANullBackendNamesTheArgument() {
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class,
            () -> Communicator.createRootInfo(null, CommunicatorOptions.defaults()));
    assertEquals("backend = 'null' is invalid; allowed: one of [hccl, lccl, host]", e.getMessage());
  }

  @Test
  void aRankThatNeverArrivesTimesOutTheOthers() throws Exception {
    Duration timeout = Duration.ofSeconds(2);
    CommunicatorOptions options = CommunicatorOptions.defaults().withTimeout(timeout);
    AllGatherParam.Builder param = Ranks.hostParam(3);
    RootInfo rootInfo = Communicator.createRootInfo("host", options);
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      long start = System.nanoTime();
      List<Future<Throwable>> results = new ArrayList<>();
      for (int rank = 0; rank < 2; rank++) {
        AllGatherParam p = param.rank(rank).build();
        results.add(
            pool.submit(
                () -> {
                  try (Communicator c = Communicator.create(p, rootInfo, options)) {
                    return null;
                  } catch (Throwable t) {
                    return t;
                  }
                }));
      }
      for (Future<Throwable> result : results) {
        Throwable error = result.get(30, TimeUnit.SECONDS);
        NpuGatherException e = assertInstanceOf(NpuGatherException.class, error);
        assertTrue(
            e.code() == ResultCode.TIMEOUT || e.code() == ResultCode.REMOTE_ERROR, e.getMessage());
      }
      long elapsedMs = (System.nanoTime() - start) / 1_000_000;
      assertTrue(elapsedMs < 2 * timeout.toMillis() + 1000, "took " + elapsedMs + " ms");
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void abortFromAnotherThreadEndsABlockedAllGatherPromptly() throws Exception {
    // Rank 1 joins but never calls the collective, so rank 0 blocks until aborted.
    CountDownLatch joined = new CountDownLatch(2);
    CountDownLatch finished = new CountDownLatch(1);
    var outcomes =
        Ranks.run(
            Ranks.hostParam(2),
            options(HostTransport.AUTO),
            (rank, comm) -> {
              joined.countDown();
              if (rank == 1) {
                finished.await(60, TimeUnit.SECONDS);
                return "idle";
              }
              joined.await();
              Thread aborter =
                  new Thread(
                      () -> {
                        sleepQuietly(300);
                        comm.abort();
                      });
              aborter.start();
              long start = System.nanoTime();
              try (ArrowBuf send = allocator.buffer(64);
                  ArrowBuf recv = allocator.buffer(128)) {
                NpuGatherException e =
                    assertThrows(
                        NpuGatherException.class, () -> comm.allGather(send, recv, 64, DType.INT8));
                long ms = (System.nanoTime() - start) / 1_000_000;
                assertEquals(ResultCode.ABORTED, e.code(), e.getMessage());
                assertTrue(ms < 2000, "abort took " + ms + " ms");
                return "aborted after " + ms + " ms";
              } finally {
                aborter.join();
                finished.countDown();
              }
            });
    assertTrue(outcomes.get(0).get().startsWith("aborted"));
    assertEquals("idle", outcomes.get(1).get());
  }

  /**
   * A rank whose code fails between create and its next collective: leaving the try block closes
   * its communicator (no call in flight, so no abort) while its process lives on. The collectives
   * it took part in succeed everywhere; the peers' next one fails within a second (the timeout is 5
   * s), naming it, over shared memory as over TCP.
   */
  @ParameterizedTest(name = "over {0}")
  @CsvSource({"AUTO", "STAGING", "TCP"})
  void aRankClosingItsCommunicatorFailsItsPeersNextCollectiveAtOnce(HostTransport transport)
      throws Exception {
    int rankSize = 3;
    int bytes = 64 << 10;
    CommunicatorOptions options =
        CommunicatorOptions.defaults()
            .withTimeout(Duration.ofSeconds(5))
            .withHostTransport(transport);
    long[] closedAt = new long[1];
    CountDownLatch closing = new CountDownLatch(1);
    var outcomes =
        Ranks.run(
            Ranks.hostParam(rankSize),
            options,
            (rank, comm) -> {
              try (ArrowBuf send = allocator.buffer(bytes);
                  ArrowBuf recv = allocator.buffer((long) bytes * rankSize)) {
                for (int i = 0; i < 3; i++) {
                  TestData.fill(send, 0, TestData.bytes(i, rank, bytes));
                  comm.allGather(send, recv, bytes, DType.INT8);
                  for (int r = 0; r < rankSize; r++) {
                    assertEquals(
                        -1,
                        TestData.firstMismatch(
                            recv, (long) r * bytes, TestData.bytes(i, r, bytes)));
                  }
                }
                if (rank == 1) {
                  synchronized (closedAt) {
                    closedAt[0] = System.nanoTime();
                  }
                  closing.countDown();
                  throw new IllegalStateException("the user's code failed");
                }
                NpuGatherException e =
                    assertThrows(
                        NpuGatherException.class,
                        () -> comm.allGather(send, recv, bytes, DType.INT8));
                long end = System.nanoTime();
                closing.await();
                long ms;
                synchronized (closedAt) {
                  ms = (end - closedAt[0]) / 1_000_000;
                }
                assertEquals(ResultCode.REMOTE_ERROR, e.code(), e.getMessage());
                assertTrue(
                    e.getMessage().contains("rank 1 closed its communicator"), e.getMessage());
                assertTrue(
                    ms < 1000, "failed " + ms + " ms after rank 1 closed: " + e.getMessage());
                return ms;
              }
            });
    assertInstanceOf(IllegalStateException.class, outcomes.get(1).error());
    assertTrue(outcomes.get(0).get() < 1000);
    assertTrue(outcomes.get(2).get() < 1000);
  }

  @Test
  void closingTwiceIsAnError() throws Exception {
    RootInfo rootInfo = Communicator.createRootInfo("host", CommunicatorOptions.defaults());
    Communicator comm =
        Communicator.create(Ranks.hostParam(1).build(), rootInfo, CommunicatorOptions.defaults());
    comm.close();
    assertThrows(IllegalStateException.class, comm::close);
    try (ArrowBuf buf = allocator.buffer(8)) {
      assertThrows(IllegalStateException.class, () -> comm.allGatherInPlace(buf, 8, DType.INT8));
    }
  }

  @Test
  void rootInfoOfAnotherBackendIsRejected() {
    RootInfo rootInfo = RootInfo.of("hccl", new byte[] {1, 2, 3});
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class,
            () ->
                Communicator.create(
                    Ranks.hostParam(1).build(), rootInfo, CommunicatorOptions.defaults()));
    assertTrue(e.getMessage().contains("hccl"), e.getMessage());
  }

  @Test
  void garbageRootInfoIsANativeInvalidArgument() {
    RootInfo rootInfo = RootInfo.of("host", new byte[] {1, 2, 3});
    NpuGatherException e =
        assertThrows(
            NpuGatherException.class,
            () ->
                Communicator.create(
                    Ranks.hostParam(1).build(), rootInfo, CommunicatorOptions.defaults()));
    assertEquals(ResultCode.INVALID_ARGUMENT, e.code(), e.getMessage());
  }

  @Test
  void closingARootInfoReleasesTheRootsListener() throws Exception {
    RootInfo rootInfo =
        Communicator.createRootInfo(
            "host", CommunicatorOptions.defaults().withBindAddress("127.0.0.1"));
    // Host root info: magic(4) version(4) id(16) secret(16) family(2) port(2, little endian).
    byte[] bytes = rootInfo.toBytes();
    int port = (bytes[42] & 0xff) | (bytes[43] & 0xff) << 8;
    try (Socket open = new Socket("127.0.0.1", port)) {
      assertTrue(open.isConnected());
    }
    rootInfo.close();
    assertThrows(ConnectException.class, () -> new Socket("127.0.0.1", port).close());
    rootInfo.close(); // idempotent
    RootInfo.of("host", bytes).close(); // a copy, nothing left to release
  }

  @Test
  void aRootsCreateRejectedInJavaStillReleasesItsRootInfo() throws Exception {
    RootInfo rootInfo =
        Communicator.createRootInfo(
            "host", CommunicatorOptions.defaults().withBindAddress("127.0.0.1"));
    byte[] bytes = rootInfo.toBytes();
    int port = (bytes[42] & 0xff) | (bytes[43] & 0xff) << 8;
    assertThrows(
        IllegalArgumentException.class,
        () ->
            Communicator.create(
                Ranks.hostParam(1).commDomain("a\0b").build(),
                rootInfo,
                CommunicatorOptions.defaults()));
    assertThrows(ConnectException.class, () -> new Socket("127.0.0.1", port).close());
  }

  private static void sleepQuietly(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
