package io.npugather.it;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.lang.reflect.Array;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.IntFunction;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.SparkSession;
import scala.Function1;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag$;

/**
 * A Spark standalone cluster on this host, started from the test classpath: a Master and {@code
 * executors} Workers, each in its own JVM ({@code org.apache.spark.deploy.master.Master}, {@code
 * org.apache.spark.deploy.worker.Worker}), and a driver in this JVM that connects with {@code
 * spark://}. Each Worker offers one core and launches one executor JVM for the application ({@code
 * CoarseGrainedExecutorBackend}).
 *
 * <p>How every JVM finds its classes: a temporary Spark home whose {@code jars/} holds the whole
 * test classpath: its jars (released ones linked, this project's copied) and a jar made of each of
 * its directories (the test classes; in a reactor build also this project's modules). The Master
 * and Workers run with {@code <sparkHome>/conf:<sparkHome>/jars/*}; a Worker builds its executors'
 * command from the Spark home the same way ({@code launcher/target/scala-2.13} tells the launcher
 * the Scala version), so any application submitted to the cluster finds this project's classes.
 *
 * <p>Network: {@link Network#LOOPBACK} puts everything on 127.0.0.1; {@link Network#NAMESPACES}
 * puts each Worker (and so its executors) in its own network namespace with its own 10.x address
 * ({@link NetworkNamespaces}), the Master and the driver on the bridge's address: the ranks are
 * then on different hosts as far as the host backend can tell. Ports are chosen by the kernel (port
 * 0) and read back from the logs.
 *
 * <p>Logs (Master, Workers, the executors' work directories) stay under {@code
 * target/spark-cluster/<appName>}. {@link #close()} stops the driver, kills the Workers, the Master
 * and any executor JVM of the application that outlives them, deletes the network namespaces and
 * the Spark home; a shutdown hook does the same when the JVM exits first.
 */
public final class SparkCluster implements AutoCloseable {
  private static final String EXECUTOR_MAIN =
      "org.apache.spark.executor.CoarseGrainedExecutorBackend";
  private static final Pattern MASTER_URL =
      Pattern.compile("Starting Spark master at (spark://\\S+)");
  private static final Duration START_TIMEOUT = Duration.ofSeconds(180);

  /** Spark homes are named {@code <tmp>/npugather-it-spark-home-<pid of the test JVM>-<id>}. */
  private static final String HOME_PREFIX = "npugather-it-spark-home-";

  private static final Pattern HOME_NAME = Pattern.compile(HOME_PREFIX + "(\\d+)-.*");

  /** Where the Workers run. */
  public enum Network {
    /** Master, Workers, executors and driver on 127.0.0.1: one host. */
    LOOPBACK,
    /** Each Worker in its own network namespace with its own address: one host per Worker. */
    NAMESPACES
  }

  /** What to start; {@link #start()} starts it. */
  public static final class Builder {
    private final String appName;
    private int executors = 2;
    private int coresPerExecutor = 1;
    private final Map<String, String> conf = new LinkedHashMap<>();
    private Network network = Network.LOOPBACK;
    private IntFunction<Map<String, String>> workerConf = i -> Map.of();
    private Map<String, String> workerEnv = Map.of();
    private boolean driver = true;
    private boolean sparkJarsOnly;

    private Builder(String appName) {
      this.appName = appName;
    }

    /** Workers, one executor (one core) each. Default 2. */
    public Builder executors(int executors) {
      this.executors = executors;
      return this;
    }

    /** Task slots of each executor (its Worker's cores): ranks that share one JVM. Default 1. */
    public Builder coresPerExecutor(int cores) {
      this.coresPerExecutor = cores;
      return this;
    }

    /** Extra Spark conf entries of the driver's application, applied last; adds to earlier ones. */
    public Builder conf(Map<String, String> conf) {
      this.conf.putAll(conf);
      return this;
    }

    public Builder network(Network network) {
      this.network = network;
      return this;
    }

    /**
     * Spark conf of Worker i (system properties of its JVM), e.g. {@code
     * spark.worker.resource.npu.amount} and {@code spark.worker.resource.npu.discoveryScript}.
     */
    public Builder workerConf(IntFunction<Map<String, String>> workerConf) {
      this.workerConf = workerConf;
      return this;
    }

    /**
     * One {@code npu} device per Worker, which the script {@code discovery.apply(i)} reports to
     * Worker i, and one for every executor and task: the resource settings of one-device hosts.
     */
    public Builder oneNpuPerWorker(IntFunction<Path> discovery) {
      workerConf(
          i ->
              Map.of(
                  "spark.worker.resource.npu.amount",
                  "1",
                  "spark.worker.resource.npu.discoveryScript",
                  discovery.apply(i).toString()));
      return conf(
          Map.of("spark.executor.resource.npu.amount", "1", "spark.task.resource.npu.amount", "1"));
    }

    /** Environment of every Worker, which its executors inherit. */
    public Builder workerEnv(Map<String, String> workerEnv) {
      this.workerEnv = Map.copyOf(workerEnv);
      return this;
    }

    /**
     * Without a driver, the cluster only runs applications submitted to {@link #masterUrl()};
     * {@link #spark()} is then unavailable.
     */
    public Builder withoutDriver() {
      this.driver = false;
      return this;
    }

    /**
     * The Spark home's {@code jars/} without this project's classes and jars and without JavaCPP: a
     * Spark distribution as a user has it, to which a job brings NpuGather itself ({@code
     * --packages} or {@code --jars}). Implies {@link #withoutDriver()}.
     */
    public Builder sparkJarsOnly() {
      this.sparkJarsOnly = true;
      this.driver = false;
      return this;
    }

    public SparkCluster start() {
      return SparkCluster.start(this);
    }
  }

  private final String appName;
  private final int executors;
  private final int coresPerExecutor;
  private final Path sparkHome;
  private final Map<Path, Path> jarsByEntry;
  private final Path logDir;
  private final String shmSuffix;
  private final Thread shutdownHook = new Thread(this::close, "spark-cluster-shutdown");
  private NetworkNamespaces net;
  private Process master;
  private String masterUrl;
  private final List<Process> workers = new ArrayList<>();
  private final List<String> workerAddresses = new ArrayList<>();
  private SparkContext sc;
  private SparkSession spark;
  private String appId;
  private boolean closed;

  private SparkCluster(
      String appName,
      int executors,
      int coresPerExecutor,
      Path sparkHome,
      Map<Path, Path> jarsByEntry,
      Path logDir) {
    this.appName = appName;
    this.executors = executors;
    this.coresPerExecutor = coresPerExecutor;
    this.sparkHome = sparkHome;
    this.jarsByEntry = jarsByEntry;
    this.logDir = logDir;
    this.shmSuffix = "it" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
  }

  /**
   * Starts a loopback cluster of {@code executors} Workers with one executor JVM each (1 core, 1
   * GiB) and a driver, and waits until all executors have registered.
   *
   * @param appName the application name (shows in the executors' command lines; names the log
   *     directory)
   * @param conf extra Spark conf entries, applied last
   */
  public static SparkCluster start(String appName, int executors, Map<String, String> conf) {
    return builder(appName).executors(executors).conf(conf).start();
  }

  public static Builder builder(String appName) {
    return new Builder(appName);
  }

  private static SparkCluster start(Builder b) {
    Path home = null;
    SparkCluster cluster = null;
    try {
      removeClustersOfGoneJvms();
      home = Files.createTempDirectory(HOME_PREFIX + ProcessHandle.current().pid() + "-");
      Map<Path, Path> jars = prepareSparkHome(home, b.sparkJarsOnly);
      Path logDir = Path.of("target", "spark-cluster", b.appName).toAbsolutePath();
      deleteQuietly(logDir);
      Files.createDirectories(logDir);
      cluster = new SparkCluster(b.appName, b.executors, b.coresPerExecutor, home, jars, logDir);
      Runtime.getRuntime().addShutdownHook(cluster.shutdownHook);
      cluster.startProcesses(b);
      if (b.driver) {
        cluster.startDriver(b.conf);
      }
      return cluster;
    } catch (IOException e) {
      closeAfterFailedStart(cluster, home);
      throw new UncheckedIOException(e);
    } catch (RuntimeException | Error e) {
      closeAfterFailedStart(cluster, home);
      throw e;
    }
  }

  /**
   * A test JVM killed outright (no shutdown hook) leaves its cluster's JVMs running from its Spark
   * home: kill them and delete the home.
   */
  private static void removeClustersOfGoneJvms() {
    try (Stream<Path> tmp = Files.list(Path.of(System.getProperty("java.io.tmpdir")))) {
      for (Path home : (Iterable<Path>) tmp::iterator) {
        Matcher m = HOME_NAME.matcher(home.getFileName().toString());
        if (m.matches() && ProcessHandle.of(Long.parseLong(m.group(1))).isEmpty()) {
          ProcessHandle.allProcesses()
              .filter(p -> commandLine(p.pid()).stream().anyMatch(a -> a.contains(home.toString())))
              .forEach(ProcessHandle::destroyForcibly);
          deleteQuietly(home);
        }
      }
    } catch (IOException e) {
      // nothing to remove
    }
  }

  private static void closeAfterFailedStart(SparkCluster cluster, Path home) {
    if (cluster != null) {
      cluster.close();
    } else {
      deleteQuietly(home);
    }
  }

  private void startProcesses(Builder b) throws IOException {
    String masterHost;
    if (b.network == Network.NAMESPACES) {
      net = NetworkNamespaces.create(b.executors);
      masterHost = net.bridgeAddress();
    } else {
      masterHost = "127.0.0.1";
    }
    Path masterLog = logDir.resolve("master.log");
    master =
        launch(
            List.of(),
            "org.apache.spark.deploy.master.Master",
            masterHost,
            Map.of(),
            List.of("--host", masterHost, "--port", "0", "--webui-port", "0"),
            Map.of(),
            masterLog);
    masterUrl = awaitLog(master, masterLog, MASTER_URL).group(1);
    awaitLog(master, masterLog, Pattern.compile("I have been elected leader"));

    List<Path> workerLogs = new ArrayList<>();
    for (int i = 0; i < b.executors; i++) {
      String host = net == null ? "127.0.0.1" : net.hostAddress(i);
      Path workDir = Files.createDirectories(logDir.resolve("worker-" + i));
      Path log = logDir.resolve("worker-" + i + ".log");
      Map<String, String> env = new LinkedHashMap<>(b.workerEnv);
      // The executors inherit the Worker's environment: the host backend binds their
      // endpoints to this host's address.
      env.putIfAbsent("NPUGATHER_HOST_ADDRESS", host);
      env.put("ATB_SHARE_MEMORY_NAME_SUFFIX", shmSuffix);
      workers.add(
          launch(
              net == null ? List.of() : net.exec(i),
              "org.apache.spark.deploy.worker.Worker",
              host,
              b.workerConf.apply(i),
              List.of(
                  "--host",
                  host,
                  "--port",
                  "0",
                  "--webui-port",
                  "0",
                  "--cores",
                  String.valueOf(b.coresPerExecutor),
                  "--memory",
                  "1g",
                  "--work-dir",
                  workDir.resolve("work").toString(),
                  masterUrl),
              env,
              log));
      workerAddresses.add(host);
      workerLogs.add(log);
    }
    for (int i = 0; i < b.executors; i++) {
      awaitLog(
          workers.get(i),
          workerLogs.get(i),
          Pattern.compile("Successfully registered with master"));
    }
  }

  /**
   * Starts a JVM of the cluster: {@code prefix} (e.g. {@code ip netns exec}), java, the Spark
   * home's classpath, {@code conf} as system properties, {@code mainClass} and {@code args}.
   */
  private Process launch(
      List<String> prefix,
      String mainClass,
      String host,
      Map<String, String> conf,
      List<String> args,
      Map<String, String> env,
      Path log)
      throws IOException {
    List<String> command = new ArrayList<>(prefix);
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.addAll(Arrays.asList(jvmOpens().split("\\s+")));
    command.addAll(
        List.of("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", classPath()));
    conf.forEach((k, v) -> command.add("-D" + k + "=" + v));
    command.add(mainClass);
    command.addAll(args);
    ProcessBuilder builder =
        new ProcessBuilder(command)
            .redirectErrorStream(true)
            .redirectOutput(log.toFile())
            .directory(logDir.toFile());
    Map<String, String> environment = builder.environment();
    environment.keySet().removeIf(k -> k.startsWith("SPARK_"));
    environment.put("SPARK_HOME", sparkHome.toString());
    environment.put("SPARK_SCALA_VERSION", "2.13");
    environment.put("SPARK_LOCAL_IP", host);
    environment.put("SPARK_LOCAL_HOSTNAME", host);
    environment.putAll(env);
    return builder.start();
  }

  /** The Spark home's conf directory and jars, as a classpath (the order Spark's launcher uses). */
  private String classPath() {
    return sparkHome.resolve("conf")
        + File.pathSeparator
        + sparkHome.resolve("jars")
        + File.separator
        + "*";
  }

  /** Waits until {@code log} has a line matching {@code pattern}; fails if the process ends. */
  private static Matcher awaitLog(Process process, Path log, Pattern pattern) {
    long deadline = System.nanoTime() + START_TIMEOUT.toNanos();
    while (true) {
      String text = readQuietly(log);
      Matcher m = pattern.matcher(text);
      if (m.find()) {
        return m;
      }
      if (!process.isAlive() || System.nanoTime() > deadline) {
        throw new IllegalStateException(
            (process.isAlive()
                    ? "no '" + pattern + "' within " + START_TIMEOUT.toSeconds() + " s"
                    : "exited with " + process.exitValue())
                + " in "
                + log
                + ":\n"
                + tail(text, 80));
      }
      try {
        Thread.sleep(100);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while waiting for " + log, e);
      }
    }
  }

  private void startDriver(Map<String, String> conf) {
    String host = net == null ? "127.0.0.1" : net.bridgeAddress();
    SparkConf sparkConf =
        new SparkConf(false)
            .setMaster(masterUrl)
            .setAppName(appName)
            .set("spark.ui.enabled", "false")
            .set("spark.dynamicAllocation.enabled", "false")
            .set("spark.driver.host", host)
            .set("spark.driver.bindAddress", host)
            .set("spark.cores.max", String.valueOf(executors * coresPerExecutor))
            .set("spark.executor.cores", String.valueOf(coresPerExecutor))
            .set("spark.executor.memory", "1g")
            // Short-lived JVMs on a small machine: C1 only and the serial collector start faster
            // and leave more CPU to the other JVMs.
            .set(
                "spark.executor.extraJavaOptions",
                jvmOpens() + " -XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
            .set("spark.sql.shuffle.partitions", String.valueOf(executors))
            .set("spark.sql.session.timeZone", "UTC")
            // A barrier stage re-run after an executor loss waits for the replacement executor:
            // check the free slots every second, for up to two minutes.
            .set("spark.scheduler.barrier.maxConcurrentTasksCheck.interval", "1s")
            .set("spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures", "120")
            .set("spark.deploy.maxExecutorRetries", "20");
    conf.forEach(sparkConf::set);
    sc = new SparkContext(sparkConf);
    appId = sc.applicationId();
    spark = SparkSession.builder().sparkContext(sc).getOrCreate();
    awaitExecutors(START_TIMEOUT);
    checkExecutorClassPath();
  }

  public SparkSession spark() {
    if (spark == null) {
      throw new IllegalStateException("this cluster was started without a driver");
    }
    return spark;
  }

  public String applicationId() {
    return appId;
  }

  /** The Master's URL, {@code spark://host:port}, for applications submitted to it. */
  public String masterUrl() {
    return masterUrl;
  }

  /** The address of Worker i (its executors' host). */
  public String workerAddress(int i) {
    return workerAddresses.get(i);
  }

  /** The address the Master and the driver listen on. */
  public String driverAddress() {
    return net == null ? "127.0.0.1" : net.bridgeAddress();
  }

  /** Master, Worker and executor logs: {@code target/spark-cluster/<appName>}. */
  public Path logDirectory() {
    return logDir;
  }

  /** The Spark home the cluster's JVMs run from (its {@code jars/} holds the classpath). */
  public Path sparkHome() {
    return sparkHome;
  }

  /**
   * The file in the Spark home's {@code jars/} that holds {@code type}'s classes: a copy of its
   * jar, or a jar made of its class directory.
   */
  public Path jarOf(Class<?> type) {
    try {
      Path entry =
          Path.of(type.getProtectionDomain().getCodeSource().getLocation().toURI())
              .toAbsolutePath()
              .normalize();
      return Optional.ofNullable(jarsByEntry.get(entry))
          .orElseThrow(
              () ->
                  new IllegalArgumentException(type + " is not from the test classpath: " + entry));
    } catch (java.net.URISyntaxException e) {
      throw new IllegalArgumentException(type.getName(), e);
    }
  }

  /** The Spark home's classpath: what the cluster's JVMs run with. */
  public String sparkClassPath() {
    return classPath();
  }

  /** The {@code ATB_SHARE_MEMORY_NAME_SUFFIX} the executors of this cluster run with. */
  public String sharedMemorySuffix() {
    return shmSuffix;
  }

  /** The executors (Workers) the cluster was started with. */
  public int executorCount() {
    return executors;
  }

  /** Task slots over all executors: a barrier stage of this many tasks runs on every executor. */
  public int taskSlots() {
    return executors * coresPerExecutor;
  }

  /**
   * Runs {@code task} in {@code tasks} barrier tasks at once (with {@link #taskSlots()} of them,
   * one in every slot, so every executor runs one) and returns each task's results.
   */
  public <T> List<T> inBarrierTasks(
      int tasks,
      Function1<scala.collection.Iterator<Object>, scala.collection.Iterator<T>> task,
      Class<T> resultType) {
    List<Object> slots = new ArrayList<>();
    for (int i = 0; i < tasks; i++) {
      slots.add(i);
    }
    Object collected =
        spark()
            .sparkContext()
            .parallelize(
                CollectionConverters.asScala(slots).toSeq(),
                tasks,
                ClassTag$.MODULE$.apply(Object.class))
            .barrier()
            .mapPartitions(task, false, ClassTag$.MODULE$.apply(resultType))
            .collect();
    List<T> results = new ArrayList<>();
    for (int i = 0; i < Array.getLength(collected); i++) {
      results.add(resultType.cast(Array.get(collected, i)));
    }
    return results;
  }

  /** Executors registered with the driver now (the driver itself not counted). */
  public int liveExecutors() {
    return sc.statusTracker().getExecutorInfos().length - 1;
  }

  /** Waits until every executor the cluster was started with is registered. */
  public void awaitExecutors(Duration timeout) {
    if (!waitUntil(timeout, () -> liveExecutors() >= executors)) {
      throw new AssertionError(
          "only "
              + liveExecutors()
              + " of "
              + executors
              + " executors registered within "
              + timeout.toSeconds()
              + " s\n"
              + executorLogs());
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
          throw new AssertionError(
              "executor "
                  + pid
                  + " has "
                  + entry
                  + " on its classpath, outside "
                  + sparkHome
                  + ": "
                  + args);
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

  /** Sends SIGKILL to one executor JVM of this application. Refuses any other process. */
  public void killExecutor(long pid) {
    if (!isExecutorOfThisApp(pid)) {
      throw new IllegalArgumentException(
          "process " + pid + " is not an executor of " + appId + ": " + commandLine(pid));
    }
    ProcessHandle handle =
        ProcessHandle.of(pid)
            .orElseThrow(() -> new IllegalStateException("process " + pid + " is gone"));
    if (!handle.destroyForcibly()) {
      throw new IllegalStateException("could not kill executor process " + pid);
    }
    try {
      handle.onExit().get(30, TimeUnit.SECONDS);
    } catch (Exception e) {
      throw new IllegalStateException("executor process " + pid + " did not exit after SIGKILL", e);
    }
  }

  /** Every executor directory of this application: {@code <workDir>/<appId>/<executorId>}. */
  public List<Path> executorDirectories() {
    return appId == null ? List.of() : executorDirectories(appId);
  }

  /** Every executor directory of application {@code id} on this cluster's Workers. */
  public List<Path> executorDirectories(String id) {
    List<Path> dirs = new ArrayList<>();
    for (int i = 0; i < workers.size(); i++) {
      Path app = logDir.resolve("worker-" + i).resolve("work").resolve(id);
      if (Files.isDirectory(app)) {
        try (Stream<Path> execs = Files.list(app)) {
          execs.filter(Files::isDirectory).forEach(dirs::add);
        } catch (IOException e) {
          // a Worker removing its directory
        }
      }
    }
    dirs.sort(Comparator.comparing(Path::toString));
    return dirs;
  }

  /** The ids of the applications that ran executors on this cluster, oldest first. */
  public List<String> applicationIds() {
    List<String> ids = new ArrayList<>();
    for (int i = 0; i < workers.size(); i++) {
      try (Stream<Path> apps = Files.list(logDir.resolve("worker-" + i).resolve("work"))) {
        apps.map(p -> p.getFileName().toString()).filter(n -> !ids.contains(n)).forEach(ids::add);
      } catch (IOException e) {
        // no application yet
      }
    }
    ids.sort(Comparator.naturalOrder());
    return ids;
  }

  /** Each executor's stderr, keyed by its directory. */
  public Map<Path, String> executorStderr() {
    return executorStderr(executorDirectories());
  }

  /** Each given executor directory's stderr, keyed by the directory. */
  static Map<Path, String> executorStderr(List<Path> directories) {
    Map<Path, String> logs = new LinkedHashMap<>();
    for (Path dir : directories) {
      Path stderr = dir.resolve("stderr");
      try {
        logs.put(
            dir,
            Files.exists(stderr)
                ? new String(Files.readAllBytes(stderr), StandardCharsets.UTF_8)
                : "");
      } catch (IOException e) {
        logs.put(dir, "<unreadable: " + e + ">");
      }
    }
    return logs;
  }

  /** The executors' stderr (last 150 lines each), for failure messages. */
  public String executorLogs() {
    StringBuilder all = new StringBuilder();
    List<Path> directories = new ArrayList<>();
    applicationIds().forEach(id -> directories.addAll(executorDirectories(id)));
    Map<Path, String> logs = executorStderr(directories);
    if (logs.isEmpty()) {
      all.append("(no executor directories under ").append(logDir).append(")\n");
    }
    logs.forEach(
        (dir, text) -> {
          String[] lines = text.split("\n", -1);
          int from = Math.max(0, lines.length - 150);
          all.append("===== executor stderr ")
              .append(dir.resolve("stderr"))
              .append(" (")
              .append(lines.length - from)
              .append(" of ")
              .append(lines.length)
              .append(" lines)\n");
          for (int i = from; i < lines.length; i++) {
            all.append(lines[i]).append('\n');
          }
        });
    return all.toString();
  }

  /**
   * Runs {@code body}; when it throws, rethrows an AssertionError whose message adds the executors'
   * stderr.
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
      // A Worker stopped by SIGTERM kills its executors; SIGKILL what outlives the grace time.
      workers.forEach(Process::destroy);
      for (Process worker : workers) {
        awaitExit(worker, Duration.ofSeconds(15));
      }
      if (master != null) {
        master.destroy();
        awaitExit(master, Duration.ofSeconds(15));
      }
      for (long pid : clusterExecutorPids()) {
        ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly);
      }
      waitUntil(Duration.ofSeconds(15), () -> clusterExecutorPids().isEmpty());
    } finally {
      if (net != null) {
        net.close();
      }
      deleteQuietly(sparkHome);
      if (!Thread.currentThread().equals(shutdownHook)) {
        try {
          Runtime.getRuntime().removeShutdownHook(shutdownHook);
        } catch (IllegalStateException e) {
          // the JVM is shutting down: the hook runs or ran close() already
        }
      }
    }
  }

  private static void awaitExit(Process process, Duration grace) {
    try {
      if (!process.waitFor(grace.toMillis(), TimeUnit.MILLISECONDS)) {
        process.destroyForcibly().waitFor(15, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      process.destroyForcibly();
      Thread.currentThread().interrupt();
    }
  }

  /** Executor JVMs of any application whose classpath is this cluster's Spark home. */
  private List<Long> clusterExecutorPids() {
    List<Long> pids = new ArrayList<>();
    ProcessHandle.allProcesses()
        .forEach(
            p -> {
              List<String> args = commandLine(p.pid());
              if (args.contains(EXECUTOR_MAIN)
                  && args.stream().anyMatch(a -> a.contains(sparkHome.toString()))) {
                pids.add(p.pid());
              }
            });
    return pids;
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
      opens =
          String.join(
              " ",
              "--add-opens=java.base/java.nio=ALL-UNNAMED",
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
   * Fills {@code home}: {@code jars/} with the whole test classpath, {@code conf/} with the test
   * logging configuration, and the directory the launcher checks for the Scala version. Returns the
   * file in {@code jars/} of each classpath entry.
   *
   * <p>Released jars are linked. Snapshot jars are copied and class directories (this project's,
   * which a concurrent build may rewrite while executors start) made into jars, so an executor
   * started late (a replacement) loads exactly what the first ones loaded.
   */
  private static Map<Path, Path> prepareSparkHome(Path home, boolean sparkJarsOnly)
      throws IOException {
    Path jars = Files.createDirectories(home.resolve("jars"));
    Files.createDirectories(home.resolve("launcher/target/scala-2.13"));
    Path conf = Files.createDirectories(home.resolve("conf"));
    // conf/ leads every executor's classpath: the test logging applies to any application.
    try (InputStream logging = SparkCluster.class.getResourceAsStream("/log4j2.properties")) {
      if (logging != null) {
        Files.copy(logging, conf.resolve("log4j2.properties"));
      }
    }
    Path repository = Path.of(System.getProperty("user.home"), ".m2", "repository");
    Map<Path, Path> jarsByEntry = new LinkedHashMap<>();
    int n = 0;
    for (String entry : testClasspath()) {
      if (entry.isBlank()) {
        continue;
      }
      Path path = Path.of(entry).toAbsolutePath().normalize();
      if (sparkJarsOnly && isProjectOrJavaCpp(path)) {
        continue;
      }
      // Numbered: two entries of the classpath may share a file name.
      String name = String.format("%03d-%s", n++, path.getFileName());
      if (Files.isDirectory(path)) {
        Path jar = jars.resolve(name + ".jar");
        writeJar(path, jar);
        jarsByEntry.put(path, jar);
      } else if (Files.isRegularFile(path) && path.getFileName().toString().endsWith(".jar")) {
        boolean released = path.startsWith(repository) && !path.toString().contains("SNAPSHOT");
        if (released) {
          Files.createSymbolicLink(jars.resolve(name), path);
        } else {
          Files.copy(path, jars.resolve(name));
        }
        jarsByEntry.put(path, jars.resolve(name));
      }
    }
    if (jarsByEntry.isEmpty()) {
      throw new IllegalStateException("no jar on the test classpath: " + testClasspath());
    }
    return jarsByEntry;
  }

  /** This project's class directories and jars, and JavaCPP's jar. */
  private static boolean isProjectOrJavaCpp(Path path) {
    String name = path.getFileName().toString();
    return Files.isDirectory(path) || name.startsWith("npugather-") || name.startsWith("javacpp-");
  }

  /** A jar of every file under {@code dir}. */
  private static void writeJar(Path dir, Path jar) throws IOException {
    try (OutputStream file = Files.newOutputStream(jar);
        JarOutputStream out = new JarOutputStream(file);
        Stream<Path> walk = Files.walk(dir)) {
      for (Path p : (Iterable<Path>) walk.filter(Files::isRegularFile)::iterator) {
        String name = dir.relativize(p).toString().replace(File.separatorChar, '/');
        out.putNextEntry(new JarEntry(name));
        Files.copy(p, out);
        out.closeEntry();
      }
    }
  }

  /** The test classpath: surefire's record of it when present, else java.class.path. */
  static List<String> testClasspath() {
    String cp =
        Optional.ofNullable(System.getProperty("surefire.test.class.path"))
            .filter(s -> !s.isBlank())
            .orElse(System.getProperty("java.class.path"));
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

  private static String readQuietly(Path file) {
    try {
      return Files.exists(file) ? Files.readString(file, StandardCharsets.UTF_8) : "";
    } catch (IOException e) {
      return "";
    }
  }

  private static String tail(String text, int lines) {
    String[] all = text.split("\n", -1);
    return String.join(
        "\n", Arrays.asList(all).subList(Math.max(0, all.length - lines), all.length));
  }
}
