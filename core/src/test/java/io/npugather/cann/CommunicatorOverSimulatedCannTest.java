package io.npugather.cann;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The operator API with the device backends "hccl" and "lccl" over the simulated CANN runtime of
 * the native module's tests ({@code native/src/test/cpp/fake_cann}): test-only libascendcl.so /
 * libhccl.so / liblcal.so on host memory. It proves the Java-to-vendor binding and the typed
 * errors, never NPU hardware. The runtime is found through NPUGATHER_CANN_LIB_DIR, so the ranks run
 * in child JVMs: three threads of one JVM, or one JVM per rank.
 */
class CommunicatorOverSimulatedCannTest {
  private static Path libDir;

  @TempDir Path folder;

  @BeforeAll
  static void buildSimulatedCann() {
    libDir = SimulatedCann.libDir();
  }

  /** Starts SimulatedCannRanks with args in a child JVM that sees only the simulated runtime. */
  private static Process start(Map<String, String> faults, Path log, String... args)
      throws Exception {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.addAll(Arrays.asList(System.getProperty("npugather.test.jvmOpens", "").split(" ")));
    command.removeIf(String::isEmpty);
    command.addAll(
        List.of(
            "-Xmx256m",
            "-cp",
            System.getProperty("java.class.path"),
            SimulatedCannRanks.class.getName()));
    command.addAll(Arrays.asList(args));
    ProcessBuilder builder =
        new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile());
    Map<String, String> env = builder.environment();
    env.keySet()
        .removeIf(
            k ->
                k.startsWith("ASCEND_")
                    || k.startsWith("HCCL_")
                    || k.startsWith("NPUGATHER_")
                    || k.startsWith("ATB_")
                    || k.startsWith("LCAL_"));
    env.put("NPUGATHER_CANN_LIB_DIR", libDir.toString());
    env.putAll(faults);
    return builder.start();
  }

  private static void awaitPassed(Process process, Path log) throws Exception {
    boolean finished = process.waitFor(120, TimeUnit.SECONDS);
    if (!finished) {
      process.destroyForcibly().waitFor();
    }
    String output = Files.readString(log, StandardCharsets.UTF_8);
    System.out.println(output);
    assertTrue(finished, "timed out");
    assertEquals(0, process.exitValue(), output);
    assertTrue(output.strip().endsWith("1 passed, 0 failed"), output);
  }

  private void runRanks(Map<String, String> faults, String... args) throws Exception {
    Path log = Files.createTempFile(folder, "ranks", ".log");
    awaitPassed(start(faults, log, args), log);
  }

  @Test
  void threadRanksRunTheOperatorMatrixWithHcclAndLcclOverSimulatedCann() throws Exception {
    runRanks(Map.of(), "hccl,lccl", "threads");
  }

  /**
   * hccl meets through the root's root info (carried in a file), lccl on an "ID:SIZE_MB" domain.
   */
  @ParameterizedTest
  @ValueSource(strings = {"hccl", "lccl"})
  void processRanksRunTheOperatorMatrixOverSimulatedCann(String backend) throws Exception {
    int ranks = 2;
    String rendezvous =
        backend.equals("hccl")
            ? folder.resolve("root-info").toString()
            : (20_000 + ProcessHandle.current().pid() % 30_000) + ":256";
    List<Process> processes = new ArrayList<>();
    List<Path> logs = new ArrayList<>();
    for (int r = 0; r < ranks; r++) {
      logs.add(Files.createTempFile(folder, "rank" + r, ".log"));
      processes.add(
          start(
              Map.of(),
              logs.get(r),
              backend,
              "process",
              String.valueOf(r),
              String.valueOf(ranks),
              rendezvous));
    }
    for (int r = 0; r < ranks; r++) {
      awaitPassed(processes.get(r), logs.get(r));
    }
  }

  @Test
  void failedRankGivesVendorExceptionsOnEveryRankWithHcclAndLcclOverSimulatedCann()
      throws Exception {
    runRanks(Map.of("NPUGATHER_FAKE_CANN_FAIL_RANK", "1"), "hccl,lccl", "failRank1");
  }

  @ParameterizedTest
  @ValueSource(strings = {"hccl", "lccl"})
  void initFailureGivesVendorExceptionWithTheCodeNameOnEveryRankOverSimulatedCann(String backend)
      throws Exception {
    String code = backend.equals("hccl") ? "11" : "-5";
    runRanks(Map.of("NPUGATHER_FAKE_CANN_INIT_FAIL", code), backend, "initFail");
  }
}
