package io.npugather.spark;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.resource.ResourceProfile;
import org.apache.spark.resource.TaskResourceRequest;
import org.apache.spark.status.api.v1.ExecutorSummary;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Driver-side check before a barrier stage of N tasks runs: fails at once with a clear message
 * instead of Spark's slow barrier slot-check retries (or a stage that can never be scheduled).
 */
public final class ClusterCheck {
  /**
   * How long to wait, on a non-local master, for executors to register before deciding that the
   * cluster is too small (executors register asynchronously after the SparkContext starts).
   * Local masters never wait.
   */
  public static final String EXECUTOR_WAIT_CONF = "spark.npugather.clusterCheck.executorWait";
  static final String DEFAULT_EXECUTOR_WAIT = "10s";
  private static final long POLL_MS = 100;

  private ClusterCheck() {}

  /**
   * Throws {@link IllegalStateException} naming what is needed and what is available when the
   * cluster cannot run {@code rankSize} concurrent tasks (barrier mode), or when dynamic allocation
   * is enabled (which Spark's barrier execution mode does not support).
   *
   * <p>Slots are counted the way Spark's own barrier check counts them
   * ({@code SparkContext.maxNumConcurrentTasks} for the default resource profile): local[N] offers
   * N / spark.task.cpus; a cluster offers, over live executors, executor cores / spark.task.cpus,
   * further limited by custom task resources (spark.task.resource.NAME.amount) when set.
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
      throw new IllegalStateException("allGatherOnNpu runs a barrier stage of " + rankSize + " tasks, and Spark's "
          + "barrier execution mode does not support dynamic allocation (spark.dynamicAllocation.enabled=true); "
          + "set spark.dynamicAllocation.enabled=false and give the application a fixed set of executors "
          + "(spark.executor.instances, spark.executor.cores) with at least " + rankSize + " task slots");
    }
  }

  static String slotMessage(int rankSize, int slots, String cluster) {
    String advice = slots >= 1
        ? "use fewer partitions (df.repartition(" + slots + ")) or more cores"
        : "add executors or cores";
    return "allGatherOnNpu needs " + rankSize + " concurrent task slots (one per rank, barrier mode) but the "
        + "cluster offers " + slots + " (" + cluster + "); " + advice;
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
        sb.append(master).append(": ").append(executors).append(executors == 1 ? " executor" : " executors")
            .append(" with ").append(cores).append(cores == 1 ? " core" : " cores").append(" in total");
      } catch (RuntimeException e) {
        sb.append(master);
      }
    }
    sb.append(", spark.task.cpus=").append(conf.getInt("spark.task.cpus", 1));
    try {
      Map<String, TaskResourceRequest> resources = new TreeMap<>(profile.taskResourcesJMap());
      resources.remove("cpus");
      for (Map.Entry<String, TaskResourceRequest> r : resources.entrySet()) {
        sb.append(", spark.task.resource.").append(r.getKey()).append(".amount=").append(r.getValue().amount());
      }
    } catch (RuntimeException e) {
      // description only
    }
    return sb.toString();
  }
}
