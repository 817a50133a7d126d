package io.npugather.bridge;

import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The hccl backend over the simulated CANN runtime ({@link SimulatedCann}): the C++ test program's
 * suites and the JNI path. This proves the binding, never anything about NPU hardware.
 */
class HcclOverSimulatedCannTest {
  private static final String PROGRAM = "hccl_over_simulated_cann_test";

  @BeforeAll
  static void buildSimulatedCann() throws Exception {
    SimulatedCann.build();
  }

  private static String runSuite(String suite, String libDir, boolean clearLoaderPath)
      throws Exception {
    return SimulatedCann.runSuite(
        PROGRAM, suite, SimulatedCann.OUT.resolve(libDir), clearLoaderPath);
  }

  @Test
  void completeLibraryOverSimulatedCannGathersAndReportsEveryFault() throws Exception {
    runSuite("full", "lib64", false);
  }

  @Test
  void libraryWithoutOptionalSymbolsOverSimulatedCannPadsRaggedBlocks() throws Exception {
    runSuite("minimal", "lib64-minimal", false);
  }

  @Test
  void communicatorManagementInLibhcommOverSimulatedCannIsFound() throws Exception {
    runSuite("split", "lib64-split", false);
  }

  @Test
  void missingCannLibrariesGiveAnActionableMessage() throws Exception {
    String output = runSuite("missing", "empty", true);
    assertTrue(output.contains("set_env.sh"), output);
  }

  @Test
  void incompleteCannInstallationsNameTheMissingFileOrSymbol() throws Exception {
    runSuite("no-hccl", "lib64-acl-only", true);
    runSuite("no-hcomm", "lib64-no-hcomm", true);
  }

  @Test
  void jniPathGathersOverSimulatedCann() throws Exception {
    SimulatedCann.runJni("hccl");
  }
}
