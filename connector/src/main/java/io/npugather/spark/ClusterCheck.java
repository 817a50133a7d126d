package io.npugather.spark;

import io.npugather.Backend;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.resource.ResourceInformation;
import org.apache.spark.resource.ResourceProfile;
import org.apache.spark.status.api.v1.ExecutorSummary;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Driver-side checks before a barrier stage of N tasks runs: fails at once with a clear message
 * instead of Spark's slow barrier slot-check retries (or a stage that can never be scheduled), and
 * decides where each rank finds its device ({@link DeviceBinding}).
 */
public final class ClusterCheck {
  /**
   * How long to wait, on a non-local master, for executors to register before deciding that the
   * cluster is too small (executors register asynchronously after the SparkContext starts). Local
   * masters never wait.
   */
  public static final String EXECUTOR_WAIT_CONF = "spark.npugather.clusterCheck.executorWait";

  static final String DEFAULT_EXECUTOR_WAIT = "10s";

  /** The setting {@link #EXECUTOR_WAIT_CONF}, as {@code SET -v} and the docs list it. */
  public static final Setting<String> EXECUTOR_WAIT_SETTING =
      Setting.application(EXECUTOR_WAIT_CONF, Setting.STRING)
          .doc(
              "on a cluster master, how long the driver waits for executors to"
                  + " register before deciding that the cluster has too few task slots")
          .check((key, value, written) -> checkExecutorWait(value))
          .createWithDefault(DEFAULT_EXECUTOR_WAIT);

  private static final long POLL_MS = 100;

  private ClusterCheck() {}

  /**
   * Checks a value of {@link #EXECUTOR_WAIT_CONF}.
   *
   * @throws IllegalArgumentException naming the key, the value and what is allowed
   */
  static void checkExecutorWait(String value) {
    Duration wait = Setting.DURATION.parse(EXECUTOR_WAIT_CONF, value);
    if (wait.isNegative()) {
      throw Setting.invalid(
          EXECUTOR_WAIT_CONF, "'" + value + "'", "a duration >= 0 such as 10s or 500ms");
    }
  }

  /**
   * Throws {@link IllegalStateException} naming what is needed and what is available when the
   * cluster cannot run {@code rankSize} concurrent tasks (barrier mode), or when dynamic allocation
   * is enabled (which Spark's barrier execution mode does not support).
   *
   * <p>Slots are counted the way Spark's own barrier check counts them ({@code
   * SparkContext.maxNumConcurrentTasks} for the default resource profile): local[N] offers N /
   * spark.task.cpus; a cluster offers, over live executors, executor cores / spark.task.cpus,
   * further limited by custom task resources (spark.task.resource.NAME.amount) when set. A local
   * master offers tasks no custom resources at all: a job asking for them would never be scheduled,
   * so that fails here too.
   */
  public static void requireBarrierSlots(SparkContext sc, int rankSize) {
    if (sc == null) {
      throw new IllegalArgumentException("sc must not be null");
    }
    if (rankSize < 1) {
      throw new IllegalArgumentException("rankSize must be >= 1, got " + rankSize);
    }
    SparkConf conf = sc.getConf();
    checkDynamicAllocation(conf, rankSize);
    ResourceProfile profile = sc.resourceProfileManager().defaultResourceProfile();
    checkLocalTaskResources(sc.master(), taskResources(profile), rankSize);
    int slots = sc.maxNumConcurrentTasks(profile);
    if (slots >= rankSize) {
      return;
    }
    if (!isLocalMaster(sc.master())) {
      long waitMs = conf.getTimeAsMs(EXECUTOR_WAIT_CONF, DEFAULT_EXECUTOR_WAIT);
      long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Math.max(0, waitMs));
      while (slots < rankSize && System.nanoTime() - until < 0 && !sc.isStopped()) {
        try {
          Thread.sleep(POLL_MS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          break;
        }
        slots = sc.maxNumConcurrentTasks(profile);
      }
      if (slots >= rankSize) {
        return;
      }
    }
    throw new IllegalStateException(slotMessage(rankSize, slots, describeCluster(sc, profile)));
  }

  /** Fails when dynamic allocation is effectively on (as Spark decides it for barrier stages). */
  static void checkDynamicAllocation(SparkConf conf, int rankSize) {
    boolean enabled = conf.getBoolean("spark.dynamicAllocation.enabled", false);
    boolean local = isLocalMaster(conf.get("spark.master", ""));
    boolean testing = conf.getBoolean("spark.dynamicAllocation.testing", false);
    // Spark ignores dynamic allocation on local masters (unless testing), and so does its
    // barrier check; everywhere else barrier stages fail with it.
    if (enabled && (!local || testing)) {
      throw new IllegalStateException(
          "allGatherOnNpu runs a barrier stage of "
              + rankSize
              + " tasks, and Spark's "
              + "barrier execution mode does not support dynamic allocation (spark.dynamicAllocation.enabled=true); "
              + "set spark.dynamicAllocation.enabled=false and give the application a fixed set of executors "
              + "(spark.executor.instances, spark.executor.cores) with at least "
              + rankSize
              + " task slots");
    }
  }

  /**
   * Fails when a local master is asked for custom task resources: Spark's local scheduler offers
   * tasks only cores, so such tasks wait forever instead of failing.
   */
  static void checkLocalTaskResources(
      String master, Map<String, Double> taskResources, int rankSize) {
    if (!isLocalMaster(master) || taskResources.isEmpty()) {
      return;
    }
    StringBuilder asked = new StringBuilder();
    taskResources.forEach(
        (name, amount) ->
            asked.append(asked.length() == 0 ? "" : ", ").append(taskResourceKey(name, amount)));
    String name = taskResources.keySet().iterator().next();
    throw new IllegalStateException(
        "allGatherOnNpu runs a barrier stage of "
            + rankSize
            + " tasks that ask "
            + asked
            + ", but the local master "
            + master
            + " offers tasks only "
            + "cores, never custom resources, so they would never be scheduled; on a local master "
            + "remove spark.task.resource."
            + name
            + ".amount and let the driver discover the "
            + "devices (spark.driver.resource."
            + name
            + ".amount and spark.driver.resource."
            + name
            + ".discoveryScript): rank r then binds the driver's address r");
  }

  /**
   * Checks that every rank will find a device where the backend needs one, and says where: the
   * task's resource on a cluster, the driver's discovered addresses (rank r, address r) on a local
   * master. Throws {@link IllegalStateException} naming what is needed and what is there.
   */
  static DeviceBinding requireDevices(SparkContext sc, AllGatherOptions options, int rankSize) {
    ResourceProfile profile = sc.resourceProfileManager().defaultResourceProfile();
    ResourceInformation driver =
        CollectionConverters.asJava(sc.resources()).get(options.resourceName());
    List<String> driverAddresses = driver == null ? null : Arrays.asList(driver.addresses());
    return planDevices(
        sc.master(),
        options.backendType(),
        options.resourceName(),
        taskResources(profile),
        driverAddresses,
        rankSize);
  }

  /**
   * {@link #requireDevices} from plain values: {@code driverAddresses} is null when the driver
   * discovered no such resource.
   */
  static DeviceBinding planDevices(
      String master,
      Backend backend,
      String resourceName,
      Map<String, Double> taskResources,
      List<String> driverAddresses,
      int rankSize) {
    boolean needsDevice = backend.needsDevice();
    if (isLocalMaster(master)) {
      if (driverAddresses != null) {
        return DeviceBinding.byRank(
            resourceName, checkDriverAddresses(master, resourceName, driverAddresses, rankSize));
      }
      if (needsDevice) {
        throw new IllegalStateException(
            "backend "
                + backend
                + " binds one device per rank, "
                + "but on the local master "
                + master
                + " tasks get no Spark resources and the "
                + "driver discovered no '"
                + resourceName
                + "' addresses; set spark.driver.resource."
                + resourceName
                + ".amount="
                + rankSize
                + " and spark.driver.resource."
                + resourceName
                + ".discoveryScript (a script printing {\"name\":\""
                + resourceName
                + "\",\"addresses\":[...]}, e.g. bin/npugather-npu-discovery): rank r binds address r");
      }
      return DeviceBinding.fromTaskResources(resourceName);
    }
    if (needsDevice && !taskResources.containsKey(resourceName)) {
      throw new IllegalStateException(
          "backend "
              + backend
              + " binds one device per rank, but "
              + "the tasks ask no '"
              + resourceName
              + "' resource (task resources: "
              + (taskResources.isEmpty() ? "none" : taskResources.keySet())
              + "); set spark.executor."
              + "resource."
              + resourceName
              + ".amount, spark.executor.resource."
              + resourceName
              + ".discoveryScript and spark.task.resource."
              + resourceName
              + ".amount=1, or "
              + AllGatherOptions.RESOURCE_NAME
              + " to the resource that holds the devices");
    }
    return DeviceBinding.fromTaskResources(resourceName);
  }

  /** The first rankSize addresses, each a device id, no two alike. */
  private static List<String> checkDriverAddresses(
      String master, String resourceName, List<String> addresses, int rankSize) {
    String keys = "spark.driver.resource." + resourceName + ".amount / .discoveryScript";
    if (addresses.size() < rankSize) {
      throw new IllegalStateException(
          "allGatherOnNpu runs "
              + rankSize
              + " ranks on the local "
              + "master "
              + master
              + ", where rank r binds the driver's address r of Spark resource '"
              + resourceName
              + "', but the driver discovered "
              + addresses.size()
              + (addresses.size() == 1 ? " address " : " addresses ")
              + addresses
              + " ("
              + keys
              + "); give the driver at least "
              + rankSize
              + " addresses, or use fewer partitions");
    }
    List<String> used = new ArrayList<>(addresses.subList(0, rankSize));
    Map<Integer, Integer> rankOfDevice = new HashMap<>();
    for (int r = 0; r < used.size(); r++) {
      int device = DeviceBinding.parseDeviceId(resourceName, used.get(r));
      Integer other = rankOfDevice.putIfAbsent(device, r);
      if (other != null) {
        throw new IllegalStateException(
            "ranks "
                + other
                + " and "
                + r
                + " would both bind "
                + "device "
                + device
                + ": the driver's addresses of Spark resource '"
                + resourceName
                + "' are "
                + addresses
                + " ("
                + keys
                + "), and only one communicating process per "
                + "device is allowed; the discovery must list every device once");
      }
    }
    return used;
  }

  /** The profile's custom task resources (name to amount per task), cpus excluded. */
  private static Map<String, Double> taskResources(ResourceProfile profile) {
    Map<String, Double> resources = new TreeMap<>();
    profile
        .taskResourcesJMap()
        .forEach(
            (name, request) -> {
              if (!"cpus".equals(name)) {
                resources.put(name, request.amount());
              }
            });
    return resources;
  }

  /** "spark.task.resource.NAME.amount=A", A without a fraction when it is whole. */
  private static String taskResourceKey(String name, double amount) {
    String a = amount == Math.rint(amount) ? Long.toString((long) amount) : Double.toString(amount);
    return "spark.task.resource." + name + ".amount=" + a;
  }

  static String slotMessage(int rankSize, int slots, String cluster) {
    String advice =
        slots >= 1
            ? "use fewer partitions ("
                + AllGatherOptions.RANK_SIZE
                + " = "
                + slots
                + ", or df.repartition("
                + slots
                + ")) or more cores"
            : "add executors or cores";
    return "allGatherOnNpu needs "
        + rankSize
        + " concurrent task slots (one per rank, barrier mode) but the "
        + "cluster offers "
        + slots
        + " ("
        + cluster
        + "); "
        + advice;
  }

  static boolean isLocalMaster(String master) {
    return master != null && (master.equals("local") || master.startsWith("local["));
  }

  /** What the cluster offers, for the message: master/executors, task cpus, task resources. */
  private static String describeCluster(SparkContext sc, ResourceProfile profile) {
    SparkConf conf = sc.getConf();
    StringBuilder sb = new StringBuilder();
    String master = sc.master();
    if (isLocalMaster(master)) {
      sb.append(master);
    } else {
      try {
        int executors = 0;
        int cores = 0;
        for (ExecutorSummary e : CollectionConverters.asJava(sc.statusStore().executorList(true))) {
          if (!"driver".equals(e.id())) {
            executors++;
            cores += e.totalCores();
          }
        }
        sb.append(master)
            .append(": ")
            .append(executors)
            .append(executors == 1 ? " executor" : " executors")
            .append(" with ")
            .append(cores)
            .append(cores == 1 ? " core" : " cores")
            .append(" in total");
      } catch (RuntimeException e) {
        sb.append(master);
      }
    }
    sb.append(", spark.task.cpus=").append(conf.getInt("spark.task.cpus", 1));
    try {
      taskResources(profile)
          .forEach((name, amount) -> sb.append(", ").append(taskResourceKey(name, amount)));
    } catch (RuntimeException e) {
      // description only
    }
    return sb.toString();
  }
}
