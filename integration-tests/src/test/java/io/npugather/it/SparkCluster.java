package io.npugather.it;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.SparkSession;

/**
 * A Spark standalone cluster on this host, started from the test classpath: one Master and
 * {@code executors} Workers inside this JVM (Spark's {@code local-cluster} master), each Worker
 * launching its executor as a separate JVM ({@code CoarseGrainedExecutorBackend}), one core each.
 *
 * <p>How the executors find their classes: a Worker builds the executor's command from its
 * Spark home ({@code WorkerCommandBuilder}): {@code <sparkHome>/jars/*} plus {@code
 * spark.executor.extraClassPath}. The harness makes a temporary Spark home whose {@code jars/}
 * holds every jar of the test classpath (released ones linked, this project's copied), and puts
 * copies of the classpath's directories (test classes) on {@code
 * spark.executor.extraClassPath}; it also holds {@code
 * launcher/target/scala-2.13}, where the launcher looks for the Scala version when {@code
 * SPARK_SCALA_VERSION} is not set (it is set too, through {@code spark.executorEnv}). In
 * local-cluster mode the Worker takes its Spark home from the system property {@code
 * spark.test.home} when {@code spark.testing} is set (otherwise from the {@code SPARK_HOME}
 * environment variable); both properties are set only while the context starts and removed
 * right after, so the driver then runs as in production (the SparkConf never sees them). While
 * they are set, {@code java.class.path} names the Spark home's copy of the classpath, which the
 * scheduler backend passes to the executors in that mode.
 *
 * <p>{@link #close()} stops the context (and with it the Master, the Workers and their
 * executors), ends any executor JVM of this application that outlives it, and deletes the
 * Spark home. Executor logs are read from the Workers' directories: {@link #executorLogs()}.
 */
public final class SparkCluster implements AutoCloseable {
  private static final Object START_LOCK = new Object();
  private static final String EXECUTOR_MAIN =
      "org.apache.spark.executor.CoarseGrainedExecutorBackend";

  private final Path sparkHome;
  private final int executors;
  private final String shmSuffix;
  private final SparkContext sc;
  private final SparkSession spark;
  private final String appId;
  private boolean closed;

  private SparkCluster(Path sparkHome, int executors, String shmSuffix, SparkContext sc) {
    this.sparkHome = sparkHome;
    this.executors = executors;
    this.shmSuffix = shmSuffix;
    this.sc = sc;
    this.appId = sc.applicationId();
    this.spark = SparkSession.builder().getOrCreate();
  }

  /**
   * Starts {@code executors} Workers with one executor JVM each (1 core, 1 GiB) and waits until
   * all executors have registered.
   *
   * @param appName the application name (shows in the executors' command lines)
   * @param conf extra Spark conf entries, applied last
   */
  public static SparkCluster start(String appName, int executors, Map<String, String> conf) {
    Path home = null;
    SparkContext sc = null;
    try {
      home = Files.createTempDirectory("npugather-it-spark-home-");
      List<String> directories = prepareSparkHome(home);
      String shmSuffix = "it" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);

      SparkConf sparkConf = new SparkConf(false)
          .setMaster("local-cluster[" + executors + ",1,1024]")
          .setAppName(appName)
          .set("spark.ui.enabled", "false")
          .set("spark.dynamicAllocation.enabled", "false")
          .set("spark.driver.host", "127.0.0.1")
          .set("spark.driver.bindAddress", "127.0.0.1")
          .set("spark.executor.memory", "1g")
          .set("spark.executor.extraClassPath", String.join(File.pathSeparator, directories))
          // Short-lived JVMs on a small machine: C1 only and the serial collector start faster
          // and leave more CPU to the other JVMs.
          .set("spark.executor.extraJavaOptions",
              jvmOpens() + " -XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
          .set("spark.executorEnv.SPARK_SCALA_VERSION", "2.13")
          // The host backend binds its endpoints on loopback; shared-memory names carry a
          // suffix of this cluster, so a test can find exactly the objects of its run.
          .set("spark.executorEnv.NPUGATHER_HOST_ADDRESS", "127.0.0.1")
          .set("spark.executorEnv.ATB_SHARE_MEMORY_NAME_SUFFIX", shmSuffix)
          .set("spark.sql.shuffle.partitions", String.valueOf(executors))
          .set("spark.sql.session.timeZone", "UTC")
          // A barrier stage re-run after an executor loss waits for the replacement executor:
          // check the free slots every second, for up to two minutes.
          .set("spark.scheduler.barrier.maxConcurrentTasksCheck.interval", "1s")
          .set("spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures", "120")
          .set("spark.deploy.maxExecutorRetries", "20");
      conf.forEach(sparkConf::set);

      synchronized (START_LOCK) {
        String testing = System.getProperty("spark.testing");
        String testHome = System.getProperty("spark.test.home");
        String classPath = System.getProperty("java.class.path");
        System.setProperty("spark.testing", "true");
        System.setProperty("spark.test.home", home.toString());
        // With spark.testing set, the scheduler backend also hands java.class.path to the
        // executors, ahead of the Spark home's jars: let that be the Spark home's copy too.
        List<String> executorClassPath = new ArrayList<>(directories);
        executorClassPath.add(home.resolve("jars") + File.separator + "*");
        System.setProperty("java.class.path", String.join(File.pathSeparator, executorClassPath));
        try {
          sc = new SparkContext(sparkConf);
        } finally {
          restore("spark.testing", testing);
          restore("spark.test.home", testHome);
          restore("java.class.path", classPath);
        }
      }
      SparkCluster cluster = new SparkCluster(home, executors, shmSuffix, sc);
      try {
        cluster.awaitExecutors(Duration.ofSeconds(180));
        cluster.checkExecutorClassPath();
      } catch (RuntimeException | Error e) {
        cluster.close();
        throw e;
      }
      return cluster;
    } catch (IOException e) {
      stopQuietly(sc);
      deleteQuietly(home);
      throw new UncheckedIOException(e);
    } catch (RuntimeException | Error e) {
      if (sc != null && !sc.isStopped()) {
        stopQuietly(sc);
      }
      deleteQuietly(home);
      throw e;
    }
  }

  public SparkSession spark() {
    return spark;
  }

  public String applicationId() {
    return appId;
  }

  /** The {@code ATB_SHARE_MEMORY_NAME_SUFFIX} the executors of this cluster run with. */
  public String sharedMemorySuffix() {
    return shmSuffix;
  }

  /** Executors registered with the driver now (the driver itself not counted). */
  public int liveExecutors() {
    return sc.statusTracker().getExecutorInfos().length - 1;
  }

  /** Waits until every executor the cluster was started with is registered. */
  public void awaitExecutors(Duration timeout) {
    if (!waitUntil(timeout, () -> liveExecutors() >= executors)) {
      throw new AssertionError("only " + liveExecutors() + " of " + executors
          + " executors registered within " + timeout.toSeconds() + " s\n" + executorLogs());
    }
  }

  /** Every executor JVM loads its classes from the Spark home's copy of the classpath. */
  private void checkExecutorClassPath() {
    for (long pid : executorPids()) {
      List<String> args = commandLine(pid);
      int cp = args.indexOf("-cp");
      if (cp < 0 || cp + 1 >= args.size()) {
        continue; // exited meanwhile
      }
      for (String entry : args.get(cp + 1).split(File.pathSeparator)) {
        if (!entry.isEmpty() && !Path.of(entry).toAbsolutePath().startsWith(sparkHome)) {
          throw new AssertionError("executor " + pid + " has " + entry
              + " on its classpath, outside " + sparkHome + ": " + args);
        }
      }
    }
  }

  /** The pids of this application's executor JVMs that are running now. */
  public List<Long> executorPids() {
    List<Long> pids = new ArrayList<>();
    try (Stream<Path> entries = Files.list(Path.of("/proc"))) {
      for (Path entry : (Iterable<Path>) entries::iterator) {
        String name = entry.getFileName().toString();
        if (name.chars().allMatch(Character::isDigit)
            && isExecutorOfThisApp(Long.parseLong(name))) {
          pids.add(Long.parseLong(name));
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return pids;
  }

  /** True when {@code pid} is a running executor JVM of this application. */
  public boolean isExecutorOfThisApp(long pid) {
    List<String> args = commandLine(pid);
    return args.contains(EXECUTOR_MAIN) && args.contains(appId);
  }

  /**
   * Sends SIGKILL to one executor JVM of this application. Refuses any other process.
   */
  public void killExecutor(long pid) {
    if (!isExecutorOfThisApp(pid)) {
      throw new IllegalArgumentException("process " + pid + " is not an executor of " + appId
          + ": " + commandLine(pid));
    }
    ProcessHandle handle = ProcessHandle.of(pid).orElseThrow(
        () -> new IllegalStateException("process " + pid + " is gone"));
    if (!handle.destroyForcibly()) {
      throw new IllegalStateException("could not kill executor process " + pid);
    }
    try {
      handle.onExit().get(30, TimeUnit.SECONDS);
    } catch (Exception e) {
      throw new IllegalStateException("executor process " + pid + " did not exit after SIGKILL", e);
    }
  }

  /** Every executor directory of this application: {@code <workerDir>/<appId>/<executorId>}. */
  public List<Path> executorDirectories() {
    List<Path> dirs = new ArrayList<>();
    List<Path> roots = new ArrayList<>();
    roots.add(sparkHome.resolve("work"));
    try (Stream<Path> tmp = Files.list(Path.of(System.getProperty("java.io.tmpdir")))) {
      tmp.filter(p -> p.getFileName().toString().startsWith("worker-")).forEach(roots::add);
    } catch (IOException e) {
      // no temporary worker directories
    }
    for (Path root : roots) {
      Path app = root.resolve(appId);
      if (Files.isDirectory(app)) {
        try (Stream<Path> execs = Files.list(app)) {
          execs.filter(Files::isDirectory).forEach(dirs::add);
        } catch (IOException e) {
          // a worker removing its directory
        }
      }
    }
    dirs.sort(Comparator.comparing(Path::toString));
    return dirs;
  }

  /** Each executor's stderr, keyed by its directory. */
  public Map<Path, String> executorStderr() {
    Map<Path, String> logs = new LinkedHashMap<>();
    for (Path dir : executorDirectories()) {
      Path stderr = dir.resolve("stderr");
      try {
        logs.put(dir, Files.exists(stderr)
            ? new String(Files.readAllBytes(stderr), StandardCharsets.UTF_8) : "");
      } catch (IOException e) {
        logs.put(dir, "<unreadable: " + e + ">");
      }
    }
    return logs;
  }

  /** The executors' stderr (last 150 lines each), for failure messages. */
  public String executorLogs() {
    StringBuilder all = new StringBuilder();
    Map<Path, String> logs = executorStderr();
    if (logs.isEmpty()) {
      all.append("(no executor directories found for ").append(appId).append(")\n");
    }
    logs.forEach((dir, text) -> {
      String[] lines = text.split("\n", -1);
      int from = Math.max(0, lines.length - 150);
      all.append("===== executor stderr ").append(dir.resolve("stderr")).append(" (")
          .append(lines.length - from).append(" of ").append(lines.length).append(" lines)\n");
      for (int i = from; i < lines.length; i++) {
        all.append(lines[i]).append('\n');
      }
    });
    return all.toString();
  }

  /**
   * Runs {@code body}; when it throws, rethrows an AssertionError whose message adds the
   * executors' stderr.
   */
  public void explainFailure(ThrowingRunnable body) {
    try {
      body.run();
    } catch (Throwable t) {
      throw new AssertionError(t + "\n" + executorLogs(), t);
    }
  }

  /** A block that may throw anything. */
  @FunctionalInterface
  public interface ThrowingRunnable {
    void run() throws Throwable;
  }

  @Override
  public synchronized void close() {
    if (closed) {
      return;
    }
    closed = true;
    try {
      stopQuietly(sc);
      SparkSession.clearActiveSession();
      SparkSession.clearDefaultSession();
      // Stopping the Workers ends their executors; end any that outlive it.
      if (!waitUntil(Duration.ofSeconds(30), () -> executorPids().isEmpty())) {
        for (long pid : executorPids()) {
          ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly);
        }
        waitUntil(Duration.ofSeconds(15), () -> executorPids().isEmpty());
      }
    } finally {
      deleteQuietly(sparkHome);
    }
  }

  /** Polls {@code condition} every 100 ms until it holds or the timeout passes. */
  public static boolean waitUntil(Duration timeout, BooleanSupplier condition) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (true) {
      if (condition.getAsBoolean()) {
        return true;
      }
      if (System.nanoTime() > deadline) {
        return false;
      }
      try {
        Thread.sleep(100);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return false;
      }
    }
  }

  /** The Spark conf entry for the JVM opens the build gives the tests. */
  static String jvmOpens() {
    String opens = System.getProperty("npugather.test.jvmOpens");
    if (opens == null || opens.isBlank()) {
      // Outside Maven: the same list as the parent pom's test.jvm.opens.
      opens = String.join(" ", "--add-opens=java.base/java.nio=ALL-UNNAMED",
          "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
          "--add-opens=java.base/java.lang=ALL-UNNAMED",
          "--add-opens=java.base/java.lang.invoke=ALL-UNNAMED",
          "--add-opens=java.base/java.util=ALL-UNNAMED",
          "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
          "--add-opens=java.base/sun.nio.cs=ALL-UNNAMED",
          "--add-opens=java.base/sun.security.action=ALL-UNNAMED",
          "--add-opens=java.base/sun.util.calendar=ALL-UNNAMED",
          "-Djdk.reflect.useDirectMethodHandle=false",
          "-Dio.netty.tryReflectionSetAccessible=true");
    }
    return opens.trim();
  }

  /**
   * Fills {@code home}: {@code jars/} with every jar of the test classpath, and the directory
   * the launcher checks for the Scala version. Returns the classpath's directories, copied into
   * {@code home/classes}.
   *
   * <p>Released jars are linked. Snapshot jars and class directories (this project's, which a
   * concurrent build may rewrite while executors start) are copied, so an executor started late
   * (a replacement) loads exactly what the first ones loaded.
   */
  private static List<String> prepareSparkHome(Path home) throws IOException {
    Path jars = Files.createDirectories(home.resolve("jars"));
    Files.createDirectories(home.resolve("launcher/target/scala-2.13"));
    Files.createDirectories(home.resolve("conf"));
    Path repository = Path.of(System.getProperty("user.home"), ".m2", "repository");
    List<String> directories = new ArrayList<>();
    int n = 0;
    for (String entry : testClasspath()) {
      if (entry.isBlank()) {
        continue;
      }
      Path path = Path.of(entry).toAbsolutePath().normalize();
      // Numbered: two entries of the classpath may share a file name.
      String name = String.format("%03d-%s", n++, path.getFileName());
      if (Files.isDirectory(path)) {
        Path copy = home.resolve("classes").resolve(name);
        copyTree(path, copy);
        directories.add(copy.toString());
      } else if (Files.isRegularFile(path) && path.getFileName().toString().endsWith(".jar")) {
        boolean released = path.startsWith(repository) && !path.toString().contains("SNAPSHOT");
        if (released) {
          Files.createSymbolicLink(jars.resolve(name), path);
        } else {
          Files.copy(path, jars.resolve(name));
        }
      }
    }
    try (Stream<Path> linked = Files.list(jars)) {
      if (linked.findAny().isEmpty()) {
        throw new IllegalStateException("no jar on the test classpath: " + testClasspath());
      }
    }
    return directories;
  }

  private static void copyTree(Path from, Path to) throws IOException {
    try (Stream<Path> walk = Files.walk(from)) {
      for (Path source : (Iterable<Path>) walk::iterator) {
        Path target = to.resolve(from.relativize(source).toString());
        if (Files.isDirectory(source)) {
          Files.createDirectories(target);
        } else {
          Files.copy(source, target);
        }
      }
    }
  }

  /** The test classpath: surefire's record of it when present, else java.class.path. */
  static List<String> testClasspath() {
    String cp = Optional.ofNullable(System.getProperty("surefire.test.class.path"))
        .filter(s -> !s.isBlank()).orElse(System.getProperty("java.class.path"));
    return List.of(cp.split(File.pathSeparator));
  }

  private static List<String> commandLine(long pid) {
    try {
      byte[] raw = Files.readAllBytes(Path.of("/proc", Long.toString(pid), "cmdline"));
      return List.of(new String(raw, StandardCharsets.UTF_8).split("\0"));
    } catch (IOException e) {
      return List.of();
    }
  }

  private static void restore(String key, String previous) {
    if (previous == null) {
      System.clearProperty(key);
    } else {
      System.setProperty(key, previous);
    }
  }

  private static void stopQuietly(SparkContext sc) {
    if (sc != null) {
      try {
        sc.stop();
      } catch (RuntimeException e) {
        // stopping anyway
      }
    }
  }

  private static void deleteQuietly(Path dir) {
    if (dir == null || !Files.exists(dir)) {
      return;
    }
    try (Stream<Path> walk = Files.walk(dir)) {
      // Links are deleted, never followed.
      walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
      // best effort
    }
  }
}
