package io.npugather.spark.testing;

import java.util.concurrent.atomic.AtomicInteger;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerJobStart;

/**
 * Counts the jobs a context starts (add it with {@code addSparkListener}), to show that a call ran
 * none. The listener bus delivers job starts a moment after they happen.
 */
public final class JobCounter extends SparkListener {
  private final AtomicInteger jobs = new AtomicInteger();

  @Override
  public void onJobStart(SparkListenerJobStart event) {
    jobs.incrementAndGet();
  }

  /** The jobs started so far. */
  public int get() {
    return jobs.get();
  }
}
