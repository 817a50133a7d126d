package io.npugather.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.spark.AllGatherOptions;
import io.npugather.spark.NpuGather;
import io.npugather.spark.testing.Causes;
import io.npugather.spark.testing.RankMajor;
import java.io.IOException;
import java.io.Serializable;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.SparkContext;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractFunction1;

/**
 * Device binding on a real multi-JVM cluster, with backend hccl over the simulated CANN runtime
 * (test-only libraries on host memory: the binding is tested, never NPU hardware). The Workers
 * discover one {@code npu} device each with a test discovery script and hand it to their executor;
 * every task asks {@code spark.task.resource.npu.amount=1}. The executors find the simulated
 * runtime through {@code ASCEND_HOME_PATH}, and its trace shows the device each rank set.
 */
class HcclDeviceBindingOnClusterTest {
  private static final Path MODULE = Path.of(System.getProperty("user.dir"));
  private static final Pattern REFUSAL =
      Pattern.compile(
          "rank (\\d+)/2 \\(stage (\\d+\\.\\d+)\\): ranks 0 and 1 were both given device 0 ");
  private static final Pattern TRACE_LINE =
      Pattern.compile("^(\\S+) rank=(\\d+) device=(-?\\d+) pid=(\\d+)$");

  private static Path work;
  private static Path cannHome;

  @BeforeAll
  static void buildSimulatedCann() throws Exception {
    work = Files.createTempDirectory("npugather-it-hccl-");
    cannHome = SimulatedCann.home();
  }

  @AfterAll
  static void removeWork() throws IOException {
    if (work != null) {
      try (Stream<Path> walk = Files.walk(work)) {
        walk.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
      }
    }
  }

  /** A discovery script; {@code body} prints the JSON. */
  private static Path discoveryScript(String name, String body) throws IOException {
    Path script = work.resolve(name);
    Files.writeString(script, "#!/bin/bash\nset -eu\n" + body + "\n");
    Files.setPosixFilePermissions(script, PosixFilePermissions.fromString("rwxr-xr-x"));
    return script;
  }

  /** Two Workers and executors with one {@code npu} device each, the simulated runtime, a trace. */
  private static SparkCluster startCluster(String appName, Path discovery, Path trace) {
    return SparkCluster.builder(appName)
        .executors(2)
        .oneNpuPerWorker(i -> discovery)
        .conf(
            Map.of(
                "spark.executorEnv.ASCEND_HOME_PATH",
                cannHome.toString(),
                "spark.executorEnv.NPUGATHER_FAKE_CANN_TRACE",
                trace.toString()))
        .start();
  }

  private static Map<String, String> hccl() {
    return Map.of(AllGatherOptions.BACKEND, "hccl", AllGatherOptions.TIMEOUT, "30s");
  }

  @Test
  void eachRankBindsTheDeviceSparkGaveItsTaskAndGathersEveryByteOverSimulatedCann()
      throws Exception {
    // Each Worker takes the next device id: device 0 for one, device 1 for the other.
    Path discovery =
        discoveryScript(
            "next-device.sh",
            String.join(
                "\n",
                "dir=$(dirname \"$0\")",
                "exec 9> \"$dir/next-device.lock\"",
                "flock 9",
                "n=$(cat \"$dir/next-device\" 2> /dev/null || echo 0)",
                "echo $((n + 1)) > \"$dir/next-device\"",
                "printf '{\"name\":\"npu\",\"addresses\":[\"%s\"]}\\n' \"$n\""));
    Path trace = work.resolve("trace-distinct.log");
    try (SparkCluster cluster = startCluster("HcclDeviceBindingOnClusterTest", discovery, trace)) {
      cluster.explainFailure(
          () -> {
            SparkSession spark = cluster.spark();
            Map<Long, Integer> given = DeviceProbe.devicesByExecutorPid(spark.sparkContext());
            assertEquals(2, given.size(), "executors and their devices: " + given);
            assertNotEquals(
                given.values().toArray()[0],
                given.values().toArray()[1],
                "the Workers own different devices: " + given);

            JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
            Dataset<Row> df =
                spark.createDataFrame(
                    jsc.parallelize(GatherChecks.mixedRows(8_000, 31), 2), GatherChecks.MIXED);
            List<List<Row>> in = RankMajor.partitions(df);
            Files.deleteIfExists(trace);
            RankMajor.assertOnEveryPartition(
                in, RankMajor.partitions(NpuGather.allGatherOnNpu(df, hccl())));

            // Every call of every rank ran on the device Spark gave that rank's executor.
            Map<Integer, Long> pidOfRank = new TreeMap<>();
            for (String line : Files.readAllLines(trace)) {
              Matcher m = TRACE_LINE.matcher(line);
              assertTrue(m.matches(), "trace line: " + line);
              int rank = Integer.parseInt(m.group(2));
              long pid = Long.parseLong(m.group(4));
              assertTrue(
                  given.containsKey(pid), "rank " + rank + " outside the executors: " + line);
              assertEquals(
                  given.get(pid),
                  Integer.valueOf(m.group(3)),
                  "rank " + rank + " set another device than its task's: " + line);
              pidOfRank.put(rank, pid);
            }
            assertEquals(List.of(0, 1), List.copyOf(pidOfRank.keySet()), "ranks traced");
            assertNotEquals(pidOfRank.get(0), pidOfRank.get(1), "ranks in one executor");
          });
    }
  }

  @Test
  void twoExecutorsDiscoveringOneDeviceOfOneHostAreRefusedOnEveryRank() throws Exception {
    Path discovery =
        discoveryScript("device-zero.sh", "echo '{\"name\":\"npu\",\"addresses\":[\"0\"]}'");
    Path trace = work.resolve("trace-shared.log");
    try (SparkCluster cluster = startCluster("HcclSharedDeviceOnClusterTest", discovery, trace)) {
      cluster.explainFailure(
          () -> {
            SparkSession spark = cluster.spark();
            Dataset<Row> df = spark.range(0, 1_000, 1, 2).toDF();
            // Collected: a barrier ResultStage, which Spark does not retry.
            Exception e =
                assertThrows(
                    Exception.class,
                    () -> RankMajor.partitions(NpuGather.allGatherOnNpu(df, hccl())));
            String m = Causes.messages(e);
            assertTrue(m.contains("ranks 0 and 1 were both given device 0 of host"), m);
            assertTrue(m.contains("spark.task.resource.npu.amount=1"), m);
            // Every rank reached the same verdict from the same table, and logged it.
            Map<String, Set<String>> ranksByStage = new TreeMap<>();
            SparkCluster.waitUntil(
                Duration.ofSeconds(10),
                () -> {
                  ranksByStage.clear();
                  cluster
                      .executorStderr()
                      .values()
                      .forEach(
                          log -> {
                            Matcher refusal = REFUSAL.matcher(log);
                            while (refusal.find()) {
                              ranksByStage
                                  .computeIfAbsent(refusal.group(2), s -> new TreeSet<>())
                                  .add(refusal.group(1));
                            }
                          });
                  return ranksByStage.values().stream().anyMatch(r -> r.size() == 2);
                });
            assertTrue(
                ranksByStage.values().stream().anyMatch(r -> r.equals(Set.of("0", "1"))),
                "ranks refused, by stage attempt: " + ranksByStage);
            assertTrue(Files.notExists(trace), "no rank reached the runtime");
          });
    }
  }

  /** One barrier task per executor reports its pid and the device Spark gave the task. */
  static final class DeviceProbe extends AbstractFunction1<Iterator<Object>, Iterator<String>>
      implements Serializable {
    private static final long serialVersionUID = 1L;

    static Map<Long, Integer> devicesByExecutorPid(SparkContext sc) {
      Object collected =
          sc.parallelize(
                  CollectionConverters.asScala(List.<Object>of(0, 1)).toSeq(),
                  2,
                  ClassTag$.MODULE$.apply(Object.class))
              .barrier()
              .mapPartitions(new DeviceProbe(), false, ClassTag$.MODULE$.apply(String.class))
              .collect();
      Map<Long, Integer> devices = new TreeMap<>();
      for (String line : (String[]) collected) {
        String[] parts = line.split(" ");
        devices.put(Long.parseLong(parts[0]), Integer.parseInt(parts[1]));
      }
      return devices;
    }

    @Override
    public Iterator<String> apply(Iterator<Object> ignored) {
      String device = BarrierTaskContext.get().resourcesJMap().get("npu").addresses()[0];
      String line = ProcessHandle.current().pid() + " " + device;
      return CollectionConverters.asScala(List.of(line).iterator());
    }
  }
}
