package io.npugather.spark;

import io.npugather.NpuGatherException;
import io.npugather.spark.rendezvous.RendezvousException;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.WeakHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.ExceptionFailure;
import org.apache.spark.SparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import scala.Option;

/**
 * The driver's record of the connector's exceptions that failed recent tasks. A failed barrier
 * stage aborts its job with the failure's text only, so a caller that sees just the job's {@code
 * SparkException} (the Python package, {@link #rankFailure}) looks the exception itself up here, by
 * stage and partition (= rank). Task-end events reach listeners asynchronously, hence the bounded
 * wait of {@link #failureOf}.
 */
public final class TaskFailures extends SparkListener {
  /** Failures kept; older ones are dropped. */
  static final int CAPACITY = 64;

  private static final Map<SparkContext, TaskFailures> INSTALLED = new WeakHashMap<>();

  /** Spark's words for the task that failed a job: a barrier stage's (stage, partition)... */
  private static final Pattern FAILED_BARRIER_TASK =
      Pattern.compile("barrier task (?:Result|ShuffleMap)Task\\((\\d+), (\\d+)\\)");

  /** ... and any other stage's (partition, stage). */
  private static final Pattern LOST_TASK =
      Pattern.compile("Lost task (\\d+)\\.\\d+ in stage (\\d+)\\.\\d+");

  private final Map<String, Throwable> recent =
      new LinkedHashMap<>(16, 0.75f, false) {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Throwable> eldest) {
          return size() > CAPACITY;
        }
      };

  private TaskFailures() {}

  /** The listener of {@code sc}, added on first use. */
  public static TaskFailures installOn(SparkContext sc) {
    synchronized (INSTALLED) {
      return INSTALLED.computeIfAbsent(
          sc,
          context -> {
            TaskFailures listener = new TaskFailures();
            context.addSparkListener(listener);
            return listener;
          });
    }
  }

  @Override
  public void onTaskEnd(SparkListenerTaskEnd end) {
    if (!(end.reason() instanceof ExceptionFailure failure)) {
      return;
    }
    Option<Throwable> thrown = failure.exception();
    if (thrown.isDefined() && thrownByConnector(thrown.get())) {
      synchronized (recent) {
        recent.put(key(end.stageId(), end.taskInfo().partitionId()), thrown.get());
        recent.notifyAll();
      }
    }
  }

  /**
   * The exception that failed the task of {@code partition} in stage {@code stageId}, waiting up to
   * {@code waitMillis} for its event; null when there is none.
   */
  public Throwable failureOf(int stageId, int partition, long waitMillis)
      throws InterruptedException {
    long deadline = System.nanoTime() + waitMillis * 1_000_000L;
    String key = key(stageId, partition);
    synchronized (recent) {
      while (!recent.containsKey(key)) {
        long left = (deadline - System.nanoTime()) / 1_000_000L;
        if (left <= 0) {
          return null;
        }
        recent.wait(left);
      }
      return recent.get(key);
    }
  }

  /**
   * The failure of a job of {@code operation} ("allGatherOnNpu", "onRanks") that Spark reported as
   * {@code job}, with the exception of the rank that failed it as the cause, waiting up to {@code
   * waitMillis} for that rank's event; null when {@code job} names no failed task or its exception
   * is not the connector's (an exception of the rows' own computation keeps Spark's error).
   */
  public RankFailedException rankFailure(Throwable job, String operation, long waitMillis)
      throws InterruptedException {
    String message = job.getMessage() == null ? "" : job.getMessage();
    Matcher task = FAILED_BARRIER_TASK.matcher(message);
    int stage;
    int partition;
    if (task.find()) {
      stage = Integer.parseInt(task.group(1));
      partition = Integer.parseInt(task.group(2));
    } else if ((task = LOST_TASK.matcher(message)).find()) {
      partition = Integer.parseInt(task.group(1));
      stage = Integer.parseInt(task.group(2));
    } else {
      return null;
    }
    Throwable failure = failureOf(stage, partition, waitMillis);
    return failure == null ? null : RankFailedException.of(operation, partition, failure, job);
  }

  /** True for an exception the connector's own code threw. */
  public static boolean thrownByConnector(Throwable thrown) {
    if (thrown instanceof NpuGatherException || thrown instanceof RendezvousException) {
      return true;
    }
    StackTraceElement[] frames = thrown.getStackTrace();
    return frames.length > 0 && frames[0].getClassName().startsWith("io.npugather.");
  }

  private static String key(int stageId, int partition) {
    return stageId + "/" + partition;
  }
}
