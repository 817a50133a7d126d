package io.npugather.spark;

import java.util.Map;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;
import org.slf4j.LoggerFactory;

/**
 * The connector as a Spark plugin, for {@code spark-defaults.conf} or {@code --conf}: {@code
 * spark.plugins=io.npugather.spark.NpuGatherPlugin}. When an executor starts (in local mode: the
 * driver's JVM, which runs the tasks), it pays the JVM's one-time costs of a gather on a daemon
 * thread ({@link JvmWarmUp}) instead of inside the first gather's tasks. Optional: without it the
 * first gather of each executor pays them. Without the operator API on the classpath ({@link
 * CoreClasspath}) it logs one line naming the jars to add and does nothing.
 */
public final class NpuGatherPlugin implements SparkPlugin {
  @Override
  public DriverPlugin driverPlugin() {
    return null;
  }

  @Override
  public ExecutorPlugin executorPlugin() {
    return new ExecutorPlugin() {
      @Override
      public void init(PluginContext ctx, Map<String, String> extraConf) {
        String missing = CoreClasspath.missing();
        if (missing != null) { // the warm-up is optional: one line, and the gathers report it
          LoggerFactory.getLogger(NpuGatherPlugin.class).warn("{}; no warm-up", missing);
          return;
        }
        JvmWarmUp.startInBackground();
      }
    };
  }
}
