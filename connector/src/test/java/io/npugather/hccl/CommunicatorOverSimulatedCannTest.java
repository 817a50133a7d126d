package io.npugather.hccl;

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

/**
 * The operator API with backend "hccl" over the simulated CANN runtime of the native module's
 * tests ({@code native/src/test/cpp/fake_cann}): test-only libascendcl.so / libhccl.so on host
 * memory. It proves the Java-to-HCCL binding and the typed errors, never NPU hardware. The
 * runtime is found through NPUGATHER_CANN_LIB_DIR, so the ranks run in a child JVM.
 */
class CommunicatorOverSimulatedCannTest {
  private static Path libDir;

  @BeforeAll
  static void buildSimulatedCann() {
    libDir = SimulatedCann.libDir();
  }

  private static void runRanks(String mode, Map<String, String> faults) throws Exception {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.addAll(Arrays.asList(System.getProperty("npugather.test.jvmOpens", "").split(" ")));
    command.removeIf(String::isEmpty);
    command.addAll(List.of("-Xmx256m", "-cp", System.getProperty("java.class.path"),
        SimulatedCannRanks.class.getName(), mode));
    Path log = Files.createTempFile("npugather-simulated-cann", ".log");
    ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true)
        .redirectOutput(log.toFile());
    Map<String, String> env = builder.environment();
    env.keySet().removeIf(k -> k.startsWith("ASCEND_") || k.startsWith("HCCL_")
        || k.startsWith("NPUGATHER_"));
    env.put("NPUGATHER_CANN_LIB_DIR", libDir.toString());
    env.putAll(faults);
    Process process = builder.start();
    boolean finished = process.waitFor(120, TimeUnit.SECONDS);
    if (!finished) {
      process.destroyForcibly().waitFor();
    }
    String output = Files.readString(log, StandardCharsets.UTF_8);
    Files.deleteIfExists(log);
    System.out.println(output);
    assertTrue(finished, "timed out");
    assertEquals(0, process.exitValue(), output);
    assertTrue(output.strip().endsWith("1 passed, 0 failed"), output);
  }

  @Test
  void threadRanksGatherEveryByteOverSimulatedCann() throws Exception {
    runRanks("gather", Map.of());
  }

  @Test
  void failedRankGivesTypedErrorsOnEveryRankOverSimulatedCann() throws Exception {
    runRanks("failRank1", Map.of("NPUGATHER_FAKE_CANN_FAIL_RANK", "1"));
  }
}
