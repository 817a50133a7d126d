package io.npugather.spark.testing;

import io.npugather.spark.NpuGather;
import io.npugather.spark.NpuGatherExtensions;
import io.npugather.spark.NpuGatherPlugin;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * A Spark session on a local master for the tests of one class: started before the class's first
 * test (and before its own {@code @BeforeAll} methods), stopped after its last (and after its
 * {@code @AfterAll} methods). The UI and the console progress bar are off; everything else is as
 * Spark ships unless the class says otherwise:
 *
 * <pre>{@code
 * @RegisterExtension
 * static final LocalSpark SPARK = LocalSpark.cores(4).shufflePartitions(4).utc();
 * }</pre>
 *
 * <p>A test that needs a session of its own (one per parameter, or one whose start it checks) calls
 * {@link #start} on a {@code LocalSpark} it does not register and stops the session itself.
 */
public final class LocalSpark implements BeforeAllCallback, AfterAllCallback {
  private final String master;
  private final Map<String, String> conf = new LinkedHashMap<>();
  private final List<Consumer<SparkSession>> onStart = new ArrayList<>();
  private SparkSession session;

  private LocalSpark(String master) {
    this.master = master;
    conf.put("spark.ui.enabled", "false");
    conf.put("spark.ui.showConsoleProgress", "false");
  }

  /** {@code local[cores]}: as many task slots, and so at most as many ranks. */
  public static LocalSpark cores(int cores) {
    if (cores < 1) {
      throw new IllegalArgumentException("cores = " + cores + "; allowed: 1 or more");
    }
    return new LocalSpark("local[" + cores + "]");
  }

  /** Sets one Spark setting of the session. */
  public LocalSpark conf(String key, String value) {
    conf.put(key, value);
    return this;
  }

  /** Sets each of {@code settings}. */
  public LocalSpark conf(Map<String, String> settings) {
    conf.putAll(settings);
    return this;
  }

  /** {@code spark.sql.shuffle.partitions}. */
  public LocalSpark shufflePartitions(int partitions) {
    return conf("spark.sql.shuffle.partitions", Integer.toString(partitions));
  }

  /** Timestamps shown and parsed in UTC, whatever the machine's zone. */
  public LocalSpark utc() {
    return conf("spark.sql.session.timeZone", "UTC");
  }

  /** The connector's session extensions: the gather's planning and the SQL table function. */
  public LocalSpark withExtensions() {
    return conf("spark.sql.extensions", NpuGatherExtensions.class.getName());
  }

  /** The connector's Spark plugin: the settings and the JVM warm-up when the context starts. */
  public LocalSpark withPlugin() {
    return conf("spark.plugins", NpuGatherPlugin.class.getName());
  }

  /**
   * A first gather call just after the start, before any test: it registers the spark.npugather.*
   * settings with the session, as a user's first call does.
   */
  public LocalSpark withFirstCall() {
    return onStart(s -> NpuGather.allGatherOnNpu(s.range(0, 2, 1, 2).toDF()));
  }

  /** Runs {@code action} on the session just after it starts (listeners, first calls). */
  public LocalSpark onStart(Consumer<SparkSession> action) {
    onStart.add(action);
    return this;
  }

  /**
   * A new session with these settings, named {@code appName}; the caller stops it. The actions of
   * {@link #onStart} are not run.
   */
  public SparkSession start(String appName) {
    SparkSession.Builder builder = SparkSession.builder().master(master).appName(appName);
    conf.forEach(builder::config);
    return builder.getOrCreate();
  }

  /** The class's session, between its start and its stop. */
  public SparkSession session() {
    if (session == null) {
      throw new IllegalStateException(
          "no session: register this LocalSpark with @RegisterExtension");
    }
    return session;
  }

  /** The class's session's context, for RDDs of Java collections. */
  public JavaSparkContext jsc() {
    return JavaSparkContext.fromSparkContext(session().sparkContext());
  }

  @Override
  public void beforeAll(ExtensionContext context) {
    session = start(context.getRequiredTestClass().getSimpleName());
    for (Consumer<SparkSession> action : onStart) {
      action.accept(session);
    }
  }

  @Override
  public void afterAll(ExtensionContext context) {
    if (session != null) {
      try {
        session.stop();
      } finally {
        session = null;
      }
    }
  }
}
