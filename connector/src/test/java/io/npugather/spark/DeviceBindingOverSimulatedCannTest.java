package io.npugather.spark;

import static io.npugather.spark.testing.Causes.messages;
import static io.npugather.spark.testing.RankMajor.assertOnEveryPartition;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.DType;
import io.npugather.Tensor;
import io.npugather.cann.SimulatedCann;
import io.npugather.spark.testing.GatherLeaks;
import io.npugather.spark.testing.LocalSpark;
import io.npugather.spark.testing.RankMajor;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Device binding on local masters, with backend hccl over the simulated CANN runtime (test-only
 * libraries on host memory: this proves the binding, never anything about NPU hardware). The driver
 * discovers the devices with a test discovery script; rank r binds the driver's address r, for
 * allGatherOnNpu and for onRanks; the simulated runtime's trace shows which device each rank set.
 */
class DeviceBindingOverSimulatedCannTest {
  private static final Path SCRIPTS =
      Path.of(System.getProperty("user.dir")).resolve("src/test/resources/npu-discovery");
  private static final Pattern TRACE_LINE =
      Pattern.compile("^(\\S+) rank=(\\d+) device=(-?\\d+) pid=(\\d+)$");

  private static Path trace;

  @BeforeAll
  static void buildSimulatedCann() {
    Path libDir = SimulatedCann.libDir();
    assertEquals(
        libDir.toString(),
        System.getenv("NPUGATHER_CANN_LIB_DIR"),
        "the test JVM must find the simulated runtime (surefire sets NPUGATHER_CANN_LIB_DIR)");
    String traceFile = System.getenv("NPUGATHER_FAKE_CANN_TRACE");
    assertTrue(
        traceFile != null && !traceFile.isBlank(),
        "surefire sets NPUGATHER_FAKE_CANN_TRACE for this test");
    trace = Path.of(traceFile);
  }

  private static SparkSession localSession(
      int slots, String discoveryScript, Map<String, String> conf) {
    Path script = SCRIPTS.resolve(discoveryScript);
    assertTrue(script.toFile().setExecutable(true), "cannot make " + script + " executable");
    return LocalSpark.cores(slots)
        .conf("spark.driver.resource.npu.amount", "2")
        .conf("spark.driver.resource.npu.discoveryScript", script.toString())
        .conf(conf)
        .start("DeviceBindingOverSimulatedCannTest");
  }

  private static Dataset<Row> randomRows(SparkSession spark, int partitions) {
    Dataset<Row> df =
        spark
            .range(0, 6_000, 1, partitions)
            .selectExpr(
                "id",
                "rand(21) as score",
                "cast(randn(22) as float) as f",
                "uuid(23) as tag",
                "unhex(sha2(cast(rand(24) as string), 256)) as bytes",
                "array(rand(25), rand(26)) as pair");
    df.cache().count();
    return df;
  }

  private static AllGatherOptions hccl() {
    return AllGatherOptions.defaults().withBackend("hccl");
  }

  /**
   * Gathers 2 partitions of random rows with {@code backend}: every row on every partition, and
   * rank r on the driver's address r for every call of the rank. Returns the (cached) input.
   */
  private static Dataset<Row> assertRanksGatherOnTheDriversDevices(
      SparkSession spark, String backend) throws IOException {
    Files.deleteIfExists(trace);
    Dataset<Row> df = randomRows(spark, 2);
    Dataset<Row> gathered =
        NpuGather.allGatherOnNpu(df, AllGatherOptions.defaults().withBackend(backend));
    assertOnEveryPartition(df, gathered);
    assertEquals(2 * 6_000L, GatherMetrics.of(gathered).rowsGathered());
    assertEquals(
        Map.of(0, Set.of(0), 1, Set.of(1)),
        devicesByRank(),
        "rank r on the driver's address r, every call of a rank on its own device");
    return df;
  }

  @Test
  void lcclRanksOfALocalMasterBindTheDriversDevicesAndGatherEveryByteOverSimulatedCann()
      throws IOException {
    SparkSession spark = localSession(2, "two-devices.sh", Map.of());
    try {
      assertRanksGatherOnTheDriversDevices(spark, "lccl").unpersist(true);
    } finally {
      spark.stop();
    }
  }

  /** The message of a run of {@code ranks} ranks with backend hccl that must be refused. */
  private static String refusal(SparkSession spark, int ranks) {
    Dataset<Row> df = spark.range(0, 10L * ranks, 1, ranks).toDF();
    Exception e = assertThrows(Exception.class, () -> NpuGather.allGatherOnNpu(df, hccl()).count());
    return messages(e);
  }

  private static float[] values(int rank, Tensor gathered) {
    float[] values = new float[(int) gathered.elementCount()];
    for (int i = 0; i < values.length; i++) {
      values[i] = gathered.buffer().getFloat(4L * i);
    }
    return values;
  }

  /** Every device the simulated runtime saw each rank set, from its trace. */
  private static Map<Integer, Set<Integer>> devicesByRank() throws IOException {
    Map<Integer, Set<Integer>> devices = new TreeMap<>();
    for (String line : Files.readAllLines(trace)) {
      Matcher m = TRACE_LINE.matcher(line);
      assertTrue(m.matches(), "trace line: " + line);
      devices
          .computeIfAbsent(Integer.parseInt(m.group(2)), r -> new TreeSet<>())
          .add(Integer.parseInt(m.group(3)));
    }
    return devices;
  }

  @Test
  void ranksBindTheDriversDiscoveredDevicesInRankOrderAndGatherEveryByteOverSimulatedCann()
      throws IOException {
    SparkSession spark = localSession(3, "two-devices.sh", Map.of());
    try {
      Dataset<Row> df = assertRanksGatherOnTheDriversDevices(spark, "hccl");

      // The tensor API binds the same way.
      Files.deleteIfExists(trace);
      Dataset<Row> floats =
          spark
              .range(0, 2 * 700, 1, 2)
              .selectExpr("cast(randn(31) as float) as a", "cast(randn(32) as float) as b");
      floats.cache().count();
      List<float[]> seen =
          NpuGather.onRanks(
              floats,
              List.of("a", "b"),
              hccl(),
              DType.FLOAT32,
              DeviceBindingOverSimulatedCannTest::values);
      float[] expected = RankMajor.floats(floats, List.of("a", "b"));
      assertEquals(2, seen.size());
      for (int rank = 0; rank < 2; rank++) {
        RankMajor.assertSameFloats(rank, expected, seen.get(rank));
      }
      assertEquals(Map.of(0, Set.of(0), 1, Set.of(1)), devicesByRank(), "onRanks devices");
      floats.unpersist(true);

      // Three ranks, two discovered devices: refused before any task runs.
      String m = refusal(spark, 3);
      assertTrue(m.contains("runs 3 ranks") && m.contains("discovered 2 addresses [0, 1]"), m);
      assertTrue(m.contains("spark.driver.resource.npu.amount"), m);
      df.unpersist(true);
      GatherLeaks.awaitArrowReleased();
    } finally {
      spark.stop();
    }
  }

  @Test
  void oneDeviceDiscoveredTwiceIsRefusedBeforeAnyTaskRuns() throws IOException {
    SparkSession spark = localSession(2, "device-zero-twice.sh", Map.of());
    try {
      Files.deleteIfExists(trace);
      String m = refusal(spark, 2);
      assertTrue(m.contains("ranks 0 and 1 would both bind device 0") && m.contains("[0, 0]"), m);
      assertTrue(m.contains("spark.driver.resource.npu"), m);
      assertTrue(Files.notExists(trace), "no rank reached the runtime");
    } finally {
      spark.stop();
    }
  }

  @Test
  @Timeout(120)
  void taskResourcesOnALocalMasterFailAtOnceInsteadOfNeverBeingScheduled() {
    // The cluster settings, copied unchanged to a local master.
    SparkSession spark =
        localSession(
            2,
            "two-devices.sh",
            Map.of(
                "spark.executor.resource.npu.amount", "2",
                "spark.executor.resource.npu.discoveryScript",
                    SCRIPTS.resolve("two-devices.sh").toString(),
                "spark.task.resource.npu.amount", "1"));
    try {
      String m = refusal(spark, 2);
      assertTrue(m.contains("spark.task.resource.npu.amount=1") && m.contains("only cores"), m);
      assertTrue(m.contains("spark.driver.resource.npu.discoveryScript"), m);
    } finally {
      spark.stop();
    }
  }
}
