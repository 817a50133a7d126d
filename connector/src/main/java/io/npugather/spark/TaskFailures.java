package io.npugather.spark;

import io.npugather.NpuGatherException;
import io.npugather.spark.rendezvous.RendezvousException;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.WeakHashMap;
import org.apache.spark.ExceptionFailure;
import org.apache.spark.SparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import scala.Option;

/**
 * The driver's record of the connector's exceptions that failed recent tasks. A failed barrier
 * stage aborts its job with the failure's text only, so a caller that sees just the job's {@code
 * SparkException} (the Python package) looks the exception itself up here, by stage and partition
 * (= rank). Task-end events reach listeners asynchronously, hence the bounded wait of {@link
 * #failureOf}.
 */
public final class TaskFailures extends SparkListener {
  /** Failures kept; older ones are dropped. */
  static final int CAPACITY = 64;

  private static final Map<SparkContext, TaskFailures> INSTALLED = new WeakHashMap<>();

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
    if (thrown.isDefined() && isConnectorFailure(thrown.get())) {
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

  private static boolean isConnectorFailure(Throwable thrown) {
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
