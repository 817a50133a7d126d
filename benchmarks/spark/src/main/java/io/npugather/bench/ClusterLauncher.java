package io.npugather.bench;

import java.io.File;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.SparkSession;

/**
 * Spark sessions for the two settings: {@code local[N]} (ranks are threads of this JVM) and {@code
 * local-cluster[E,k,mem]} (a Master and E Workers in this JVM, each Worker starting one executor
 * JVM with k cores: k ranks per executor JVM).
 *
 * <p>A Worker builds its executor's classpath from its Spark home's {@code jars/}; in local-cluster
 * mode it takes the home from {@code spark.test.home} when {@code spark.testing} is set. The
 * launcher makes a temporary Spark home whose {@code jars/} links every jar of this JVM's
 * classpath; the classpath's directories go to {@code spark.executor.extraClassPath}. The two
 * properties, and a {@code java.class.path} naming the same classpath (handed to executors in this
 * mode), are set only while the context starts. Executors get this JVM's {@code --add-opens}
 * options. (The integration tests' {@code SparkCluster} does the same, with copies of the
 * directories, since a concurrent build may rewrite them during a test.)
 */
final class ClusterLauncher implements AutoCloseable {
  private final SparkSession spark;
  private final Path sparkHome;

  private ClusterLauncher(SparkSession spark, Path sparkHome) {
    this.spark = spark;
    this.sparkHome = sparkHome;
  }

  SparkSession spark() {
    return spark;
  }

  static ClusterLauncher local(int ranks, SparkConf conf) {
    conf.setMaster("local[" + ranks + "]");
    return new ClusterLauncher(SparkSession.builder().config(conf).getOrCreate(), null);
  }

  /** {@code ranks} executor JVMs of one core (one rank) each; see the method below. */
  static ClusterLauncher executorJvms(
      int ranks, int executorMemoryMb, String executorJavaOptions, SparkConf conf)
      throws IOException {
    return executorJvms(ranks, 1, executorMemoryMb, executorJavaOptions, conf);
  }

  /**
   * {@code executors} executor JVMs of {@code coresPerExecutor} cores (task slots: ranks) and
   * {@code executorMemoryMb} each; extra executor JVM options from {@code executorJavaOptions}
   * (e.g. a flight recording).
   */
  static synchronized ClusterLauncher executorJvms(
      int executors,
      int coresPerExecutor,
      int executorMemoryMb,
      String executorJavaOptions,
      SparkConf conf)
      throws IOException {
    Path home = Files.createTempDirectory("npugather-bench-spark-home-");
    try {
      List<String> directories = fillSparkHome(home);
      conf.setMaster(
              "local-cluster[" + executors + "," + coresPerExecutor + "," + executorMemoryMb + "]")
          .set("spark.executor.cores", String.valueOf(coresPerExecutor))
          .set("spark.executor.memory", executorMemoryMb + "m")
          .set("spark.executor.extraClassPath", String.join(File.pathSeparator, directories))
          .set("spark.executor.extraJavaOptions", (jvmOpens() + " " + executorJavaOptions).trim())
          .set("spark.executorEnv.SPARK_SCALA_VERSION", "2.13");
      List<String> executorClassPath = new ArrayList<>(directories);
      executorClassPath.add(home.resolve("jars") + File.separator + "*");
      String classPath = System.getProperty("java.class.path");
      System.setProperty("spark.testing", "true");
      System.setProperty("spark.test.home", home.toString());
      System.setProperty("java.class.path", String.join(File.pathSeparator, executorClassPath));
      SparkContext sc;
      try {
        sc = new SparkContext(conf);
      } finally {
        System.clearProperty("spark.testing");
        System.clearProperty("spark.test.home");
        System.setProperty("java.class.path", classPath);
      }
      ClusterLauncher launcher = new ClusterLauncher(SparkSession.builder().getOrCreate(), home);
      launcher.awaitExecutors(sc, executors, 180_000);
      return launcher;
    } catch (IOException | RuntimeException e) {
      delete(home);
      throw e;
    }
  }

  private void awaitExecutors(SparkContext sc, int executors, long timeoutMillis) {
    long deadline = System.currentTimeMillis() + timeoutMillis;
    while (sc.statusTracker().getExecutorInfos().length - 1 < executors) {
      if (System.currentTimeMillis() > deadline) {
        close();
        throw new IllegalStateException(
            "only "
                + (sc.statusTracker().getExecutorInfos().length - 1)
                + " of "
                + executors
                + " executor JVMs registered within "
                + timeoutMillis
                + " ms");
      }
      try {
        Thread.sleep(100);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        close();
        throw new IllegalStateException("interrupted while waiting for executors", e);
      }
    }
  }

  @Override
  public void close() {
    try {
      spark.stop();
      SparkSession.clearActiveSession();
      SparkSession.clearDefaultSession();
    } finally {
      if (sparkHome != null) {
        delete(sparkHome);
      }
    }
  }

  /** The {@code --add-opens} and related options this JVM was started with. */
  static String jvmOpens() {
    return ManagementFactory.getRuntimeMXBean().getInputArguments().stream()
        .filter(
            a ->
                a.startsWith("--add-opens")
                    || a.startsWith("-Djdk.reflect.")
                    || a.startsWith("-Dio.netty."))
        .collect(Collectors.joining(" "));
  }

  /**
   * Links the classpath's jars into {@code home/jars} (numbered: two jars may share a name);
   * returns the classpath's directories, which executors get on their extra classpath.
   */
  private static List<String> fillSparkHome(Path home) throws IOException {
    Path jars = Files.createDirectories(home.resolve("jars"));
    Files.createDirectories(home.resolve("launcher/target/scala-2.13"));
    List<String> directories = new ArrayList<>();
    String[] entries = System.getProperty("java.class.path").split(File.pathSeparator);
    for (int i = 0; i < entries.length; i++) {
      Path path = Path.of(entries[i]).toAbsolutePath().normalize();
      if (Files.isDirectory(path)) {
        directories.add(path.toString());
      } else if (path.toString().endsWith(".jar") && Files.isRegularFile(path)) {
        Files.createSymbolicLink(jars.resolve(i + "-" + path.getFileName()), path);
      }
    }
    return directories;
  }

  private static void delete(Path dir) {
    try (Stream<Path> walk = Files.walk(dir)) {
      walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
      System.err.println("could not delete " + dir + ": " + e);
    }
  }
}
