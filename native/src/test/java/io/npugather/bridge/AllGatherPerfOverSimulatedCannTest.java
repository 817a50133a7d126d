package io.npugather.bridge;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@code bin/allgather-perf} as the README and docs/npu.md run it: built from the sources by the
 * script itself, ranks as processes, with backend host and with hccl and lccl over the simulated
 * CANN runtime ({@link SimulatedCann}; never an NPU, so no figure here means anything). Every
 * size's row must report 0 wrong bytes.
 */
class AllGatherPerfOverSimulatedCannTest {
  private static final Path SCRIPT = SimulatedCann.MODULE.resolveSibling("bin/allgather-perf");

  @BeforeAll
  static void buildSimulatedCann() throws Exception {
    SimulatedCann.build();
  }

  private static String run(Map<String, String> extraEnv, String... args) throws Exception {
    List<String> command = new ArrayList<>(List.of("bash", SCRIPT.toString()));
    command.addAll(List.of(args));
    return SimulatedCann.runWithoutCann(command, extraEnv, false, 300);
  }

  /** The rows of the table: 5 sizes from 4 KiB to 64 KiB, each with 0 wrong bytes. */
  private static void expectCleanTable(String output, String backend) {
    assertEquals(5, deviceBytesOfCleanRows(output, backend).size(), output);
  }

  /** The device bytes of each row of the table, every row with 0 wrong bytes. */
  private static List<Long> deviceBytesOfCleanRows(String output, String backend) {
    assertTrue(
        output.contains("# allgather-perf: backend " + backend + ", ranks 2, launch processes"),
        output);
    List<Long> deviceBytes = new ArrayList<>();
    for (String line : output.split("\n")) {
      String[] cells = line.trim().split("\\s+");
      if (cells.length == 8 && cells[0].matches("\\d+")) {
        assertEquals("0", cells[6], "wrong bytes in: " + line);
        deviceBytes.add(Long.parseLong(cells[7]));
      }
    }
    return deviceBytes;
  }

  @Test
  void gathersLargerThanTheDeviceBudgetRunInRoundsWithinIt() throws Exception {
    Map<String, String> env =
        Map.of(
            "NPUGATHER_CANN_LIB_DIR",
            SimulatedCann.OUT.resolve("lib64").toString(),
            "NPUGATHER_DEVICE_BUFFER_BYTES",
            "64K");
    for (String backend : List.of("hccl", "lccl")) {
      String output =
          run(
              env,
              "--backend",
              backend,
              "--ranks",
              "2",
              "--min-bytes",
              "4K",
              "--max-bytes",
              "1M",
              "--iters",
              "3",
              "--warmup",
              "1");
      List<Long> deviceBytes = deviceBytesOfCleanRows(output, backend);
      assertEquals(9, deviceBytes.size(), output);
      // 4 KiB fits at once (send + 2 blocks); 1 MiB per rank runs in rounds within 64 KiB.
      assertEquals(3 * 4096L, deviceBytes.get(0), output);
      for (long bytes : deviceBytes) {
        assertTrue(bytes > 0 && bytes <= 65536, output);
      }
    }
  }

  @Test
  void hcclAndLcclRanksAsProcessesOnTheirDevicesOverSimulatedCann() throws Exception {
    Map<String, String> env =
        Map.of(
            "NPUGATHER_CANN_LIB_DIR",
            SimulatedCann.OUT.resolve("lib64").toString(),
            "NPUGATHER_FAKE_CANN_TRACE",
            SimulatedCann.OUT.resolve("perf-trace").toString());
    Files.deleteIfExists(SimulatedCann.OUT.resolve("perf-trace"));
    for (String backend : List.of("hccl", "lccl")) {
      String output =
          run(
              env,
              "--backend",
              backend,
              "--ranks",
              "2",
              "--devices",
              "3,1",
              "--min-bytes",
              "4K",
              "--max-bytes",
              "64K",
              "--iters",
              "3",
              "--warmup",
              "1");
      expectCleanTable(output, backend);
      assertTrue(output.contains("# devices of ranks 0..1: 3,1"), output);
    }
    String trace =
        Files.readString(SimulatedCann.OUT.resolve("perf-trace"), StandardCharsets.UTF_8);
    assertTrue(
        trace.contains("init rank=0 device=3") && trace.contains("init rank=1 device=1"), trace);
    assertTrue(!trace.contains("device=0") && !trace.contains("device=2"), trace);
  }

  @Test
  void hostRanksAsProcesses() throws Exception {
    expectCleanTable(
        run(
            Map.of(),
            "--backend",
            "host",
            "--ranks",
            "2",
            "--min-bytes",
            "4K",
            "--max-bytes",
            "64K",
            "--iters",
            "3",
            "--warmup",
            "1"),
        "host");
  }
}
