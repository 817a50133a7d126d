package io.npugather.bridge;

import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The lccl backend over the simulated CANN runtime ({@link SimulatedCann}: a simulated liblcal.so
 * next to the simulated ACL): ranks as threads and as processes, all three ways LCCL makes a
 * communicator, every injected fault, and the JNI path. This proves the binding, never anything
 * about NPU hardware.
 */
class LcclOverSimulatedCannTest {
  private static final String PROGRAM = "lccl_over_simulated_cann_test";

  @BeforeAll
  static void buildSimulatedCann() throws Exception {
    SimulatedCann.build();
  }

  @Test
  void lcclOverSimulatedCannGathersBetweenThreadsAndProcessesAndReportsEveryFault()
      throws Exception {
    SimulatedCann.runSuite(PROGRAM, "full", SimulatedCann.OUT.resolve("lib64"), false);
  }

  @Test
  void missingLiblcalGivesAnActionableMessage() throws Exception {
    String output =
        SimulatedCann.runSuite(
            PROGRAM, "no-lcal", SimulatedCann.OUT.resolve("lib64-acl-only"), true);
    assertTrue(output.contains("nnal/atb/set_env.sh"), output);
  }

  @Test
  void jniPathGathersWithLcclOverSimulatedCann() throws Exception {
    SimulatedCann.runJni("lccl");
  }
}
