package io.npugather.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.examples.FeatureSharding;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The example job (io.npugather.examples.FeatureSharding) submitted to the standalone cluster the
 * way a user submits it: {@code SparkSubmit --master spark://... --class ... <examples jar>}, the
 * driver in its own JVM, no {@code --master} flag of the job's own. The job checks a sample of its
 * recommendations against plain Spark SQL and exits non-zero on a mismatch.
 */
class FeatureShardingSubmittedToClusterTest {
  static final Duration JOB_TIMEOUT = Duration.ofMinutes(4);

  /** Closed after the class's last test, whatever happened. */
  @AutoClose private static SparkCluster cluster;

  @BeforeAll
  static void startClusterWithoutDriver() {
    cluster =
        SparkCluster.builder("FeatureShardingSubmittedToClusterTest")
            .executors(2)
            .withoutDriver()
            .start();
  }

  @Test
  void submittedExampleJobGathersOnTwoExecutorsAndMatchesPlainSpark() {
    cluster.explainFailure(
        () -> {
          Path work = cluster.logDirectory().resolve("job");
          Files.createDirectories(work);
          Path output = work.resolve("output");
          String out =
              runJob(
                  cluster,
                  work,
                  submitCommand(
                      cluster,
                      List.of(),
                      cluster.jarOf(FeatureSharding.class),
                      List.of(
                          "--ranks",
                          "2",
                          "--items",
                          "4000",
                          "--dim",
                          "24",
                          "--queries",
                          "300",
                          "--top-k",
                          "5",
                          "--check",
                          "30",
                          "--seed",
                          "17",
                          "--output",
                          output.toString())));
          assertTrue(out.contains("check: 30/30 queries match plain Spark"), out);
          assertTrue(out.contains("recommendations     1500 rows (300 queries x top-5)"), out);
          assertTrue(out.contains("master " + cluster.masterUrl()), "not on the cluster:\n" + out);

          // Both ranks gathered, each in its own executor JVM of the submitted application.
          List<String> apps = cluster.applicationIds();
          assertEquals(1, apps.size(), "applications: " + apps);
          List<GatherChecks.Gather> gathers =
              GatherChecks.gathers(
                  SparkCluster.executorStderr(cluster.executorDirectories(apps.get(0))), Map.of());
          assertEquals(
              List.of(0, 1),
              gathers.stream().map(GatherChecks.Gather::rank).toList(),
              "gathers: " + gathers);
          assertEquals(
              2,
              gathers.stream().map(GatherChecks.Gather::executor).distinct().count(),
              "ranks sharing an executor: " + gathers);
          GatherChecks.assertNoSharedMemoryObjects(cluster);
        });
  }

  /**
   * Runs a SparkSubmit command (see {@link #submitCommand}) from {@code work}, its output in {@code
   * work/driver.log}; asserts it ends in time with exit code 0 and returns the output.
   */
  static String runJob(SparkCluster cluster, Path work, List<String> command) throws Exception {
    Path log = work.resolve("driver.log");
    ProcessBuilder builder =
        new ProcessBuilder(command)
            .redirectErrorStream(true)
            .redirectOutput(log.toFile())
            .directory(work.toFile());
    builder.environment().keySet().removeIf(k -> k.startsWith("SPARK_"));
    builder
        .environment()
        .putAll(
            Map.of(
                "SPARK_HOME",
                cluster.sparkHome().toString(),
                "SPARK_SCALA_VERSION",
                "2.13",
                "SPARK_LOCAL_IP",
                cluster.driverAddress()));
    Process driver = builder.start();
    boolean ended = driver.waitFor(JOB_TIMEOUT.toSeconds(), TimeUnit.SECONDS);
    if (!ended) {
      driver.destroyForcibly().waitFor(30, TimeUnit.SECONDS);
    }
    String out = Files.readString(log, StandardCharsets.UTF_8);
    assertTrue(ended, "the job did not end within " + JOB_TIMEOUT + ":\n" + out);
    assertEquals(0, driver.exitValue(), "exit code of the job:\n" + out);
    return out;
  }

  /**
   * SparkSubmit in client mode, in a JVM of its own that runs from the cluster's Spark home: {@code
   * submitOptions} (e.g. {@code --packages}) go before the application jar.
   */
  static List<String> submitCommand(
      SparkCluster cluster, List<String> submitOptions, Path jar, List<String> jobArgs) {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.addAll(Arrays.asList(SparkCluster.jvmOpens().split("\\s+")));
    command.addAll(
        List.of(
            "-Xmx512m",
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            "-cp",
            cluster.sparkClassPath(),
            "org.apache.spark.deploy.SparkSubmit",
            "--master",
            cluster.masterUrl(),
            "--deploy-mode",
            "client",
            "--class",
            FeatureSharding.class.getName(),
            "--total-executor-cores",
            "2",
            "--executor-cores",
            "1",
            "--executor-memory",
            "1g",
            "--conf",
            "spark.driver.host=" + cluster.driverAddress(),
            "--conf",
            "spark.executor.extraJavaOptions="
                + SparkCluster.jvmOpens()
                + " -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"));
    command.addAll(submitOptions);
    command.add(jar.toString());
    command.addAll(jobArgs);
    return command;
  }
}
