package io.npugather.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.npugather.spark.NpuGather;
import io.npugather.spark.testing.GatherLeaks;
import io.npugather.spark.testing.RankMajor;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.jdk.javaapi.CollectionConverters;

/** Expected-output checks, test data and log / shared-memory inspection. */
final class GatherChecks {
  /**
   * The line a rank logs when its gather is done (logger GatherTask; see log4j2.properties); a rank
   * on a device names it, a CPU rank does not.
   */
  private static final Pattern GATHERED =
      Pattern.compile(
          "(?m)^.* GatherTask: .*\\brank"
              + " (\\d+)/\\d+\\b.*gathered \\d+ rows over ([^\\s,]+)(?: \\(device (\\d+)\\))?.*$");

  /** One rank's gather as its executor logged it; device -1 for a CPU rank. */
  record Gather(int rank, Path executor, String transport, int device) {}

  private GatherChecks() {}

  /**
   * allGatherOnNpu of random mixed rows in {@code rankSize} partitions on the cluster: every output
   * partition checked row by row; each rank gathered once, in its own executor JVM, over {@code
   * transport}. Returns the ranks' gathers in rank order.
   */
  static List<Gather> gatherMixedRows(
      SparkCluster cluster,
      int rankSize,
      Map<String, String> options,
      long seed,
      String transport) {
    SparkSession spark = cluster.spark();
    Dataset<Row> df = mixedInput(spark, 6_000 * rankSize, seed, rankSize);
    List<List<Row>> in = RankMajor.partitions(df);
    assertEquals(rankSize, in.size());
    Map<Path, Integer> offsets = logOffsets(cluster);

    List<List<Row>> out = RankMajor.partitions(NpuGather.allGatherOnNpu(df, options));

    RankMajor.assertOnEveryPartition(in, out);
    List<Gather> gathers = gathersSince(cluster, offsets);
    assertEquals(rankSize, gathers.size(), "one gather per rank: " + gathers);
    for (int r = 0; r < rankSize; r++) {
      assertEquals(r, gathers.get(r).rank(), "gathers: " + gathers);
      assertEquals(transport, gathers.get(r).transport(), "gathers: " + gathers);
    }
    assertEquals(
        rankSize,
        gathers.stream().map(Gather::executor).distinct().count(),
        "ranks sharing an executor: " + gathers);
    return gathers;
  }

  /** {@code count} random {@link #MIXED} rows ({@link #mixedRows}) in {@code partitions}. */
  static Dataset<Row> mixedInput(SparkSession spark, int count, long seed, int partitions) {
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    return spark.createDataFrame(jsc.parallelize(mixedRows(count, seed), partitions), MIXED);
  }

  /** Strings (with multi-byte characters), nested arrays with null elements, maps, nulls. */
  static final StructType MIXED =
      new StructType(
          new StructField[] {
            DataTypes.createStructField("id", DataTypes.LongType, false),
            DataTypes.createStructField("name", DataTypes.StringType, true),
            DataTypes.createStructField("score", DataTypes.DoubleType, true),
            DataTypes.createStructField("count", DataTypes.IntegerType, true),
            DataTypes.createStructField(
                "tags", DataTypes.createArrayType(DataTypes.StringType, true), true),
            DataTypes.createStructField(
                "features", DataTypes.createArrayType(DataTypes.FloatType, true), true),
            DataTypes.createStructField(
                "matrix",
                DataTypes.createArrayType(
                    DataTypes.createArrayType(DataTypes.LongType, true), true),
                true),
            DataTypes.createStructField(
                "point",
                new StructType().add("x", DataTypes.DoubleType).add("label", DataTypes.StringType),
                true),
            DataTypes.createStructField(
                "attrs",
                DataTypes.createMapType(DataTypes.StringType, DataTypes.IntegerType),
                true),
            DataTypes.createStructField("payload", DataTypes.BinaryType, true)
          });

  static List<Row> mixedRows(int count, long seed) {
    Random random = new Random(seed);
    List<Row> rows = new ArrayList<>(count);
    for (int n = 0; n < count; n++) {
      int tagCount = random.nextInt(5);
      List<String> tags = new ArrayList<>();
      for (int t = 0; t < tagCount; t++) {
        tags.add(random.nextInt(6) == 0 ? null : randomString(random));
      }
      List<Float> features = new ArrayList<>();
      for (int f = random.nextInt(9); f > 0; f--) {
        features.add(random.nextInt(10) == 0 ? null : random.nextFloat());
      }
      List<scala.collection.immutable.Seq<Long>> matrix = new ArrayList<>();
      for (int m = random.nextInt(3); m > 0; m--) {
        matrix.add(
            random.nextInt(4) == 0 ? null : seq(Arrays.asList(random.nextLong(), null, (long) n)));
      }
      Map<String, Integer> attrs = new HashMap<>();
      for (int a = random.nextInt(3); a > 0; a--) {
        attrs.put("k" + random.nextInt(100), random.nextInt());
      }
      byte[] payload = new byte[random.nextInt(40)];
      random.nextBytes(payload);
      rows.add(
          RowFactory.create(
              (long) n,
              maybe(random, randomString(random)),
              maybe(random, random.nextGaussian()),
              maybe(random, random.nextInt()),
              maybe(random, seq(tags)),
              maybe(random, seq(features)),
              maybe(random, seq(matrix)),
              maybe(
                  random,
                  RowFactory.create(
                      random.nextDouble(), random.nextBoolean() ? null : randomString(random))),
              maybe(random, CollectionConverters.asScala(attrs)),
              maybe(random, payload)));
    }
    return rows;
  }

  /** The gathers the executors logged after {@code offsets} (from {@link #logOffsets}). */
  static List<Gather> gathersSince(SparkCluster cluster, Map<Path, Integer> offsets) {
    return gathers(cluster.executorStderr(), offsets);
  }

  /** The gathers in the executors' stderr (by executor directory) after {@code offsets}. */
  static List<Gather> gathers(Map<Path, String> stderr, Map<Path, Integer> offsets) {
    List<Gather> gathers = new ArrayList<>();
    stderr.forEach(
        (dir, text) -> {
          String fresh = text.substring(Math.min(text.length(), offsets.getOrDefault(dir, 0)));
          Matcher m = GATHERED.matcher(fresh);
          while (m.find()) {
            gathers.add(
                new Gather(
                    Integer.parseInt(m.group(1)),
                    dir,
                    m.group(2),
                    m.group(3) == null ? -1 : Integer.parseInt(m.group(3))));
          }
        });
    gathers.sort(Comparator.comparingInt(Gather::rank));
    return gathers;
  }

  /**
   * Which executor logged the gather of which rank, after {@code offsets}: rank -> executor
   * directories.
   */
  static Map<Integer, List<Path>> ranksByExecutor(
      SparkCluster cluster, Map<Path, Integer> offsets) {
    Map<Integer, List<Path>> ranks = new TreeMap<>();
    for (Gather g : gathersSince(cluster, offsets)) {
      ranks.computeIfAbsent(g.rank(), r -> new ArrayList<>()).add(g.executor());
    }
    return ranks;
  }

  static Map<Path, Integer> logOffsets(SparkCluster cluster) {
    Map<Path, Integer> offsets = new HashMap<>();
    cluster.executorStderr().forEach((dir, text) -> offsets.put(dir, text.length()));
    return offsets;
  }

  /**
   * No /dev/shm object of the cluster's run is left. Tasks release their resources when they
   * complete, which may trail the job's end by a moment.
   */
  static void assertNoSharedMemoryObjects(SparkCluster cluster) {
    SparkCluster.waitUntil(
        Duration.ofSeconds(10),
        () -> GatherLeaks.sharedMemoryObjects(cluster.sharedMemorySuffix()).isEmpty());
    assertEquals(
        List.of(),
        GatherLeaks.sharedMemoryObjects(cluster.sharedMemorySuffix()),
        "/dev/shm objects with suffix " + cluster.sharedMemorySuffix());
  }

  /**
   * Nothing of the cluster's gathers is left: no /dev/shm object of the run, no Arrow memory and no
   * native communicator in any executor JVM (read by {@link ExecutorLeakProbe}).
   */
  static void assertNothingLeftBehind(SparkCluster cluster) {
    assertNoSharedMemoryObjects(cluster);
    ExecutorLeakProbe.assertNothingHeld(cluster, cluster.executorCount());
  }

  private static Object maybe(Random random, Object value) {
    return random.nextInt(6) == 0 ? null : value;
  }

  private static String randomString(Random random) {
    StringBuilder s = new StringBuilder();
    for (int i = random.nextInt(24); i > 0; i--) {
      int kind = random.nextInt(10);
      s.append(kind == 0 ? 'é' : kind == 1 ? '数' : (char) ('a' + random.nextInt(26)));
    }
    return s.toString();
  }

  private static <T> scala.collection.immutable.Seq<T> seq(List<T> values) {
    return CollectionConverters.asScala(values).toSeq();
  }
}
