package io.npugather;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** Ranks as separate JVM processes: cross-memory attach, staging and TCP between processes. */
class MultiProcessTest {
  private static final long TIMEOUT_MS = 20_000;

  @TempDir Path folder;

  private static final class Rank {
    final Process process;
    final List<String> lines = new ArrayList<>();
    final Thread reader;

    Rank(Process process) {
      this.process = process;
      this.reader =
          new Thread(
              () -> {
                try (BufferedReader in =
                    new BufferedReader(
                        new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                  for (String line = in.readLine(); line != null; line = in.readLine()) {
                    synchronized (lines) {
                      lines.add(line);
                      lines.notifyAll();
                    }
                  }
                } catch (IOException ignored) {
                  // The process ended.
                }
              });
      reader.start();
    }

    boolean awaitLine(String prefix, long ms) throws InterruptedException {
      long deadline = System.currentTimeMillis() + ms;
      synchronized (lines) {
        while (lines.stream().noneMatch(l -> l.startsWith(prefix))) {
          long left = deadline - System.currentTimeMillis();
          if (left <= 0) {
            return false;
          }
          lines.wait(left);
        }
        return true;
      }
    }

    String output() {
      synchronized (lines) {
        return String.join("\n", lines);
      }
    }
  }

  private Rank launch(
      int rank,
      int rankSize,
      String domain,
      String transport,
      int bytes,
      long timeoutMs,
      String mode)
      throws IOException {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.addAll(Arrays.asList(System.getProperty("npugather.test.jvmOpens", "").split(" ")));
    command.removeIf(String::isEmpty);
    command.addAll(
        List.of(
            "-Xmx256m",
            "-cp",
            System.getProperty("java.class.path"),
            RankProcess.class.getName(),
            folder.toString(),
            Integer.toString(rank),
            Integer.toString(rankSize),
            domain,
            transport,
            Integer.toString(bytes),
            "99",
            Long.toString(timeoutMs),
            mode));
    ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
    return new Rank(builder.start());
  }

  /** Yama's ptrace_scope >= 1 forbids cross-memory attach; the core then falls back to staging. */
  private static boolean cmaAllowedByKernel() throws IOException {
    Path scope = Path.of("/proc/sys/kernel/yama/ptrace_scope");
    return !Files.exists(scope) || Files.readString(scope).strip().equals("0");
  }

  private static String uniqueDomain() {
    return "mp-" + UUID.randomUUID().toString().substring(0, 8);
  }

  private static List<Path> shmObjectsOf(String domain) throws IOException {
    try (Stream<Path> files = Files.list(Path.of("/dev/shm"))) {
      return files.filter(p -> p.getFileName().toString().contains(domain)).toList();
    }
  }

  @ParameterizedTest(name = "{0} processes over {1}")
  @CsvSource({"2, AUTO, cma", "3, AUTO, cma", "2, TCP, tcp", "3, STAGING, staging"})
  void processesGatherEveryByteOverEachTransport(int rankSize, String transport, String used)
      throws Exception {
    String domain = uniqueDomain();
    List<Rank> ranks = new ArrayList<>();
    try {
      for (int r = 0; r < rankSize; r++) {
        ranks.add(launch(r, rankSize, domain, transport, (3 << 20) + 17, TIMEOUT_MS, "gather"));
      }
      for (Rank rank : ranks) {
        assertTrue(rank.process.waitFor(60, TimeUnit.SECONDS), "rank did not finish");
        rank.reader.join();
        assertEquals(0, rank.process.exitValue(), rank.output());
        String expected = used.equals("cma") && !cmaAllowedByKernel() ? "staging" : used;
        assertTrue(rank.output().contains("OK " + expected), rank.output());
      }
      assertEquals(List.of(), shmObjectsOf(domain));
    } finally {
      ranks.forEach(r -> r.process.destroyForcibly());
    }
  }

  @ParameterizedTest(name = "over {0}")
  @CsvSource({"AUTO", "TCP"})
  void aRankRejectingItsInputFailsEveryProcessAtOnceWithTheSameError(String transport)
      throws Exception {
    long timeoutMs = 60_000;
    String domain = uniqueDomain();
    List<Rank> ranks = new ArrayList<>();
    try {
      for (int r = 0; r < 3; r++) {
        ranks.add(launch(r, 3, domain, transport, 16, timeoutMs, "operator-reject"));
      }
      for (Rank rank : ranks) {
        assertTrue(rank.awaitLine("READY", 60_000), rank.output());
      }
      long joinedAt = System.nanoTime();
      List<String> failures = new ArrayList<>();
      for (Rank rank : ranks) {
        assertTrue(
            rank.process.waitFor(timeoutMs / 2, TimeUnit.MILLISECONDS),
            "a rank waited for the timeout: " + rank.output());
        rank.reader.join();
        assertEquals(1, rank.process.exitValue(), rank.output());
        failures.add(
            rank.output()
                .lines()
                .filter(l -> l.startsWith("FAILED"))
                .findFirst()
                .orElseThrow(() -> new AssertionError(rank.output())));
      }
      long ms = (System.nanoTime() - joinedAt) / 1_000_000;
      assertTrue(ms < timeoutMs / 2, "the ranks failed after " + ms + " ms");
      for (String failure : failures) {
        assertEquals(failures.get(0), failure);
      }
      assertTrue(failures.get(0).startsWith("FAILED INVALID_USAGE "), failures.get(0));
      assertTrue(
          failures
              .get(0)
              .contains("rank 1 rejected its input: x = int32[] has 0 dims; allowed: 1 to 7 dims"),
          failures.get(0));
      assertEquals(List.of(), shmObjectsOf(domain));
    } finally {
      ranks.forEach(r -> r.process.destroyForcibly());
    }
  }

  /**
   * A rank process that closes its communicator right after joining and lives on: the other
   * process's collective fails within a second of it (the timeout is 10 s) with REMOTE_ERROR naming
   * it, over cross-memory attach, staging and TCP alike.
   */
  @ParameterizedTest(name = "over {0}")
  @CsvSource({"AUTO", "STAGING", "TCP"})
  void aRankProcessClosingItsCommunicatorFailsTheOtherAtOnce(String transport) throws Exception {
    long timeoutMs = 10_000;
    String domain = uniqueDomain();
    Rank peer = launch(0, 2, domain, transport, 1 << 20, timeoutMs, "gather");
    Rank leaver = launch(1, 2, domain, transport, 1 << 20, timeoutMs, "leave");
    try {
      assertTrue(leaver.awaitLine("LEFT", 60_000), leaver.output());
      long leftAt = System.nanoTime();
      assertTrue(peer.awaitLine("FAILED", timeoutMs + 5_000), peer.output());
      long ms = (System.nanoTime() - leftAt) / 1_000_000;
      assertTrue(peer.process.waitFor(30, TimeUnit.SECONDS), "peer did not exit");
      peer.reader.join();
      String out = peer.output();
      assertEquals(1, peer.process.exitValue(), out);
      assertTrue(out.contains("FAILED REMOTE_ERROR"), out);
      assertTrue(out.contains("rank 1 closed its communicator"), out);
      // At once: on the leaver's word, not at the timeout (bound loose for a loaded machine).
      assertTrue(ms < timeoutMs / 2, "the peer failed " + ms + " ms after rank 1 closed: " + out);
      assertTrue(leaver.process.isAlive(), "the leaving rank lives on: " + leaver.output());
      assertEquals(List.of(), shmObjectsOf(domain));
    } finally {
      peer.process.destroyForcibly();
      leaver.process.destroyForcibly();
    }
  }

  @Test
  void aRankKilledMidCollectiveFailsTheOthersWithinTheTimeoutAndLeavesNoSharedMemory()
      throws Exception {
    long timeoutMs = 3_000;
    String domain = uniqueDomain();
    Rank survivor = launch(0, 2, domain, "AUTO", 1 << 20, timeoutMs, "gather");
    Rank victim = launch(1, 2, domain, "AUTO", 1 << 20, timeoutMs, "stall");
    try {
      assertTrue(victim.awaitLine("READY", 60_000), victim.output());
      assertTrue(survivor.awaitLine("READY", 60_000), survivor.output());
      long killedAt = System.nanoTime();
      victim.process.destroyForcibly(); // SIGKILL
      assertTrue(
          survivor.process.waitFor(2 * timeoutMs + 5_000, TimeUnit.MILLISECONDS),
          "survivor still blocked");
      long ms = (System.nanoTime() - killedAt) / 1_000_000;
      survivor.reader.join();
      String out = survivor.output();
      assertEquals(1, survivor.process.exitValue(), out);
      assertTrue(out.contains("FAILED REMOTE_ERROR") || out.contains("FAILED TIMEOUT"), out);
      assertTrue(ms < 2 * timeoutMs + 2_000, "survivor failed after " + ms + " ms");
      assertEquals(List.of(), shmObjectsOf(domain));
    } finally {
      survivor.process.destroyForcibly();
      victim.process.destroyForcibly();
    }
  }
}
