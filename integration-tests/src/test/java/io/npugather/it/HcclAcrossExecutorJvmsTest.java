package io.npugather.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.npugather.spark.AllGatherOptions;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * Backend hccl across executor JVMs over the simulated CANN runtime (test-only libascendcl.so /
 * libhccl.so on host memory, {@link SimulatedCann}): this exercises the binding and the Spark
 * resource path, not NPU hardware. Each Worker owns one "npu" from its own discovery script (Worker
 * i: device i + 1); the application asks one per executor and one per task, so each rank must run
 * on its own executor's device.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class HcclAcrossExecutorJvmsTest {
  private static final Path MODULE = Path.of(System.getProperty("user.dir"));
  private static final Path DISCOVERY = MODULE.resolve("target/fake-npu-discovery");

  /** Closed after the class's last test, whatever happened. */
  @AutoClose private static SparkCluster cluster;

  private static final List<Long> executorPids = new ArrayList<>();

  @BeforeAll
  static void startClusterWithOneSimulatedNpuPerWorker() throws Exception {
    Path cann = SimulatedCann.home();
    Files.createDirectories(DISCOVERY);
    List<Path> scripts = new ArrayList<>();
    for (int i = 0; i < 2; i++) {
      Path script = DISCOVERY.resolve("worker-" + i + ".sh");
      Files.writeString(
          script,
          "#!/usr/bin/env bash\necho '{\"name\": \"npu\", \"addresses\": [\"" + (i + 1) + "\"]}'\n",
          StandardCharsets.UTF_8);
      Files.setPosixFilePermissions(script, PosixFilePermissions.fromString("rwxr-xr-x"));
      scripts.add(script);
    }
    cluster =
        SparkCluster.builder("HcclAcrossExecutorJvmsTest")
            .executors(2)
            .oneNpuPerWorker(scripts::get)
            .workerEnv(Map.of("NPUGATHER_CANN_LIB_DIR", cann.resolve("lib64").toString()))
            .conf(Map.of("spark.npugather.backend", "hccl"))
            .start();
    executorPids.addAll(cluster.executorPids());
  }

  @Test
  @Order(1)
  void everyPartitionHoldsEveryRowWithBackendHcclOnEachExecutorsOwnDevice() {
    cluster.explainFailure(
        () -> {
          List<GatherChecks.Gather> gathers =
              GatherChecks.gatherMixedRows(
                  cluster, 2, Map.of(AllGatherOptions.BACKEND, "hccl"), 31, "hccl");
          for (GatherChecks.Gather g : gathers) {
            int worker = workerOf(g.executor());
            assertEquals(
                worker + 1,
                g.device(),
                "rank "
                    + g.rank()
                    + " on worker "
                    + worker
                    + " used another device than its executor's: "
                    + gathers);
          }
        });
  }

  @Test
  @Order(2)
  void noSharedMemoryArrowMemoryOrCommunicatorIsLeftBehind() {
    cluster.explainFailure(
        () -> {
          GatherChecks.assertNothingLeftBehind(cluster);
          // The simulated runtime's own objects are named after the creating process.
          List<String> left;
          try (Stream<Path> files = Files.list(Path.of("/dev/shm"))) {
            left =
                files
                    .map(p -> p.getFileName().toString())
                    .filter(
                        n ->
                            executorPids.stream()
                                .anyMatch(pid -> n.startsWith("npgfake-" + pid + "-")))
                    .toList();
          }
          assertEquals(List.of(), left, "simulated CANN objects of executors " + executorPids);
        });
  }

  /** The Worker whose work directory holds {@code executorDir}. */
  private static int workerOf(Path executorDir) {
    for (Path p = executorDir; p != null; p = p.getParent()) {
      String name = p.getFileName() == null ? "" : p.getFileName().toString();
      if (name.matches("worker-\\d+")) {
        return Integer.parseInt(name.substring("worker-".length()));
      }
    }
    throw new AssertionError("not under a worker directory: " + executorDir);
  }
}
