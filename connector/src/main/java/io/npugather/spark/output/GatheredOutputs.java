package io.npugather.spark.output;

import io.npugather.spark.RankFailedException;
import io.npugather.spark.Setting;
import io.npugather.spark.SettingValues;
import io.npugather.spark.TaskFailures;
import java.lang.ref.Cleaner;
import java.lang.ref.WeakReference;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import org.apache.spark.ExceptionFailure;
import org.apache.spark.MapOutputTrackerMaster;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.SparkException;
import org.apache.spark.TaskFailedReason;
import org.apache.spark.TaskKilled;
import org.apache.spark.network.util.JavaUtils;
import org.apache.spark.npugather.StageFailures;
import org.apache.spark.scheduler.ExecutorCacheTaskLocation;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerApplicationEnd;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.scheduler.StageInfo;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.RDDInfo;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The driver's side of the gathered outputs of one SparkContext: which jobs read each gather, and
 * its release. A gather's output stays in the executors while any job that reads it runs, and
 * {@link #RELEASE_DELAY} after the last one ends (0 by default: its memory comes back at once;
 * longer lets the same DataFrame's next action read it again); then the driver forgets its map
 * outputs (a later job runs the gather again, with the same answer) and asks every executor to
 * remove its blocks (each is freed once its readers finish). It is released too when its RDD is no
 * longer reachable on the driver. Unless the gather is retryable, a failed attempt of its barrier
 * stage fails the jobs that read it at once, with that attempt's first failed task's failure.
 */
public final class GatheredOutputs {
  /** How long a gather's output is kept after the last job that read it ended (session conf). */
  public static final String RELEASE_DELAY = "spark.npugather.output.releaseDelay";

  public static final String DEFAULT_RELEASE_DELAY = "0s";

  /** The setting {@link #RELEASE_DELAY}, as {@code SET -v} and the docs list it. */
  public static final Setting<String> RELEASE_DELAY_SETTING =
      Setting.session(RELEASE_DELAY, Setting.STRING)
          .doc(
              "session setting: how long a gather's output is kept after the last"
                  + " job that read it ended")
          .check((key, value, written) -> releaseDelayMs(value))
          .createWithDefault(DEFAULT_RELEASE_DELAY);

  /**
   * Whether the ranks that share an executor gather one output together (session conf; backend
   * host): the executor then holds every row once instead of once per rank.
   */
  public static final String ONE_PER_EXECUTOR = "spark.npugather.output.onePerExecutor";

  public static final String DEFAULT_ONE_PER_EXECUTOR = "true";

  /** The setting {@link #ONE_PER_EXECUTOR}, as {@code SET -v} and the docs list it. */
  public static final Setting<String> ONE_PER_EXECUTOR_SETTING =
      Setting.session(ONE_PER_EXECUTOR, Setting.STRING)
          .doc(
              "session setting, backend `host`: `true`, the ranks that share an"
                  + " executor gather one output together, so the executor holds every"
                  + " row once; `false`, every rank gathers a copy of its own")
          .check((key, value, written) -> onePerExecutor(value))
          .createWithDefault(DEFAULT_ONE_PER_EXECUTOR);

  /**
   * {@code value} of {@link #ONE_PER_EXECUTOR}.
   *
   * @throws IllegalArgumentException naming the key, the value and what is allowed
   */
  public static boolean onePerExecutor(String value) {
    return SettingValues.trueOrFalse(ONE_PER_EXECUTOR, value);
  }

  private static final Logger LOG = LoggerFactory.getLogger(GatheredOutputs.class);
  private static final Map<SparkContext, GatheredOutputs> BY_CONTEXT = new IdentityHashMap<>();
  private static final Cleaner CLEANER = Cleaner.create();

  private final SparkContext sparkContext;
  private final ScheduledExecutorService timer;
  private final Map<Integer, Gather> byReaderRdd = new HashMap<>(); // guarded by this

  /**
   * The first task failure of recent stage attempts ("stage.attempt"), as Spark words a barrier
   * stage's failure. Spark records the failure of every task that ends unsuccessfully in the
   * stage's info, the last one winning (a peer killed after the first failure, too), so the first
   * is kept here; a few attempts suffice, the failure is read when the attempt completes.
   */
  private final Map<String, FirstFailure> firstFailures = // guarded by this
      new LinkedHashMap<>(16, 0.75f, false) {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<String, FirstFailure> eldest) {
          return size() > RECENT_ATTEMPTS;
        }
      };

  private static final int RECENT_ATTEMPTS = 32;

  private GatheredOutputs(SparkContext sparkContext) {
    this.sparkContext = sparkContext;
    this.timer =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "npugather-output-release");
              t.setDaemon(true);
              return t;
            });
  }

  /**
   * {@code value} of {@link #RELEASE_DELAY} in milliseconds.
   *
   * @throws IllegalArgumentException naming the key, the value and what is allowed
   */
  public static long releaseDelayMs(String value) {
    long ms;
    try {
      ms = JavaUtils.timeStringAsMs(value);
    } catch (RuntimeException e) {
      ms = -1;
    }
    if (ms < 0) {
      throw new IllegalArgumentException(
          RELEASE_DELAY
              + " = "
              + value
              + " is invalid; allowed: "
              + "a duration >= 0 such as 2s or 500ms");
    }
    return ms;
  }

  /** The registry of {@code sc}, made (and listening to its jobs) on first use. */
  public static GatheredOutputs of(SparkContext sc) {
    synchronized (BY_CONTEXT) {
      BY_CONTEXT
          .values()
          .removeIf(
              outputs -> {
                if (outputs.sparkContext.isStopped()) {
                  outputs.timer.shutdownNow();
                  return true;
                }
                return false;
              });
      GatheredOutputs outputs = BY_CONTEXT.get(sc);
      if (outputs == null) {
        outputs = new GatheredOutputs(sc);
        sc.addSparkListener(outputs.new Listener());
        BY_CONTEXT.put(sc, outputs);
      }
      return outputs;
    }
  }

  /**
   * Watches the gather read by RDD {@code readerRdd} (whose id is {@code readerRddId}): its map
   * outputs are those of shuffle {@code shuffleId}, kept as blocks of RDD {@code barrierRddId}.
   * Unless {@code retryable}, a failed attempt of its barrier stage fails the jobs that read it at
   * once, with that attempt's failure, instead of Spark running the stage again. The output is
   * released {@code releaseDelayMs} after the last job that read it ends.
   */
  public void track(
      Object readerRdd,
      int readerRddId,
      int shuffleId,
      int barrierRddId,
      boolean retryable,
      long releaseDelayMs) {
    synchronized (this) {
      byReaderRdd.put(readerRddId, new Gather(shuffleId, barrierRddId, retryable, releaseDelayMs));
    }
    WeakReference<GatheredOutputs> self = new WeakReference<>(this);
    CLEANER.register(
        readerRdd,
        () -> {
          GatheredOutputs outputs = self.get();
          if (outputs != null) {
            outputs.forget(readerRddId);
          }
        });
  }

  /** Gathers watched now (tests). */
  public synchronized int tracked() {
    return byReaderRdd.size();
  }

  /**
   * Where reader partition {@code partition} finds an output: the executors holding a current map
   * output of shuffle {@code shuffleId} (every one holds every row), rank {@code partition}'s
   * first. Empty before the gather ran.
   */
  public static String[] preferredLocations(int shuffleId, int partition, int numPartitions) {
    Option<BlockManagerId[]> holders =
        ((MapOutputTrackerMaster) SparkEnv.get().mapOutputTracker())
            .getLocationsWithLargestOutputs(shuffleId, partition, numPartitions, 0.0);
    if (holders.isEmpty()) {
      return new String[0];
    }
    BlockManagerId[] ids = holders.get();
    String[] locations = new String[ids.length];
    for (int i = 0; i < ids.length; i++) {
      locations[i] = new ExecutorCacheTaskLocation(ids[i].host(), ids[i].executorId()).toString();
    }
    return locations;
  }

  private void forget(int readerRddId) {
    Gather gather;
    synchronized (this) {
      gather = byReaderRdd.remove(readerRddId);
    }
    if (gather != null) {
      release(gather);
    }
  }

  private void release(Gather gather) {
    if (sparkContext.isStopped()) {
      return;
    }
    try {
      MapOutputTrackerMaster tracker = (MapOutputTrackerMaster) SparkEnv.get().mapOutputTracker();
      if (tracker.containsShuffle(gather.shuffleId)) {
        tracker.unregisterAllMapAndMergeOutput(gather.shuffleId);
      }
      sparkContext.env().blockManager().master().removeRdd(gather.barrierRddId, false);
      LOG.debug("allGatherOnNpu: released the output of shuffle {}", gather.shuffleId);
    } catch (RuntimeException e) {
      LOG.warn("allGatherOnNpu: cannot release the output of shuffle {}", gather.shuffleId, e);
    }
  }

  void jobStarted(int jobId, Set<Integer> rddIds) {
    synchronized (this) {
      for (Map.Entry<Integer, Gather> e : byReaderRdd.entrySet()) {
        if (rddIds.contains(e.getKey())) {
          Gather gather = e.getValue();
          gather.jobs.add(jobId);
          if (gather.pendingRelease != null) {
            gather.pendingRelease.cancel(false);
            gather.pendingRelease = null;
          }
        }
      }
    }
  }

  void jobEnded(int jobId) {
    List<Gather> now = new ArrayList<>();
    synchronized (this) {
      for (Gather gather : byReaderRdd.values()) {
        if (gather.jobs.remove(jobId) && gather.jobs.isEmpty()) {
          if (gather.releaseDelayMs == 0) {
            now.add(gather);
          } else {
            gather.pendingRelease =
                timer.schedule(
                    () -> releaseIfUnused(gather), gather.releaseDelayMs, TimeUnit.MILLISECONDS);
          }
        }
      }
    }
    now.forEach(this::release);
  }

  private void releaseIfUnused(Gather gather) {
    synchronized (this) {
      if (!gather.jobs.isEmpty() || gather.pendingRelease == null) {
        return; // a job started meanwhile
      }
      gather.pendingRelease = null;
    }
    release(gather);
  }

  /** A task ended: the first failure of its stage attempt is kept (a kill is not a failure). */
  synchronized void taskEnded(
      int stageId, int stageAttempt, String taskType, int partition, TaskFailedReason reason) {
    if (reason instanceof TaskKilled) {
      return;
    }
    Throwable exception =
        reason instanceof ExceptionFailure failure && failure.exception().isDefined()
            ? failure.exception().get()
            : null;
    firstFailures.putIfAbsent(
        stageId + "." + stageAttempt,
        new FirstFailure(
            "Stage failed because barrier task "
                + taskType
                + "("
                + stageId
                + ", "
                + partition
                + ") finished unsuccessfully.\n"
                + reason.toErrorString(),
            partition,
            exception));
  }

  /** The first task failure of a stage attempt: Spark's words, the rank and its exception. */
  private record FirstFailure(String text, int rank, Throwable exception) {}

  /**
   * A stage attempt failed with {@code reported} as Spark's reason: the jobs that read a gather of
   * it that is not retryable fail with its first task failure if it is known, else {@code
   * reported}; with the rank's exception as the cause when the connector threw it.
   */
  void stageFailed(int stageId, int stageAttempt, Set<Integer> rddIds, String reported) {
    Set<Integer> jobs = new HashSet<>();
    FirstFailure first;
    synchronized (this) {
      for (Gather gather : byReaderRdd.values()) {
        if (!gather.retryable && rddIds.contains(gather.barrierRddId)) {
          jobs.addAll(gather.jobs);
        }
      }
      first = firstFailures.get(stageId + "." + stageAttempt);
    }
    if (jobs.isEmpty()) {
      return;
    }
    String reason =
        "allGatherOnNpu failed, and it is not run again because npugather.retryable is false: "
            + (first != null ? first.text() : reported);
    if (first != null
        && first.exception() != null
        && TaskFailures.thrownByConnector(first.exception())) {
      // Spark's job cancellation keeps no cause: fail the stage's jobs as a failed task set does.
      StageFailures.abort(
          sparkContext,
          stageId,
          stageAttempt,
          reason,
          RankFailedException.of(
              RankFailedException.GATHER,
              first.rank(),
              first.exception(),
              new SparkException(reason),
              " (not run again: npugather.retryable is false)"));
      return;
    }
    for (int job : jobs) {
      sparkContext.cancelJob(job, reason);
    }
  }

  private static Set<Integer> rddIds(StageInfo stage) {
    Set<Integer> ids = new HashSet<>();
    for (RDDInfo rdd : CollectionConverters.asJava(stage.rddInfos())) {
      ids.add(rdd.id());
    }
    return ids;
  }

  private static final class Gather {
    final int shuffleId;
    final int barrierRddId;
    final boolean retryable;
    final long releaseDelayMs;
    final Set<Integer> jobs = new HashSet<>(); // running jobs that read it; guarded by the registry
    ScheduledFuture<?> pendingRelease; // guarded by the registry

    Gather(int shuffleId, int barrierRddId, boolean retryable, long releaseDelayMs) {
      this.shuffleId = shuffleId;
      this.barrierRddId = barrierRddId;
      this.retryable = retryable;
      this.releaseDelayMs = releaseDelayMs;
    }
  }

  private final class Listener extends SparkListener {
    @Override
    public void onJobStart(SparkListenerJobStart event) {
      Set<Integer> ids = new HashSet<>();
      for (StageInfo stage : CollectionConverters.asJava(event.stageInfos())) {
        ids.addAll(rddIds(stage));
      }
      jobStarted(event.jobId(), ids);
    }

    @Override
    public void onStageCompleted(SparkListenerStageCompleted event) {
      StageInfo stage = event.stageInfo();
      if (stage.failureReason().isDefined()) {
        stageFailed(
            stage.stageId(), stage.attemptNumber(), rddIds(stage), stage.failureReason().get());
      }
    }

    @Override
    public void onTaskEnd(SparkListenerTaskEnd event) {
      if (event.reason() instanceof TaskFailedReason failed) {
        taskEnded(
            event.stageId(),
            event.stageAttemptId(),
            event.taskType(),
            event.taskInfo().partitionId(),
            failed);
      }
    }

    @Override
    public void onJobEnd(SparkListenerJobEnd event) {
      jobEnded(event.jobId());
    }

    @Override
    public void onApplicationEnd(SparkListenerApplicationEnd event) {
      synchronized (GatheredOutputs.this) {
        byReaderRdd.clear();
        firstFailures.clear();
      }
      timer.shutdownNow();
      synchronized (BY_CONTEXT) {
        BY_CONTEXT.remove(sparkContext);
      }
    }
  }
}
