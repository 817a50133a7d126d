package io.npugather.spark;

import java.util.Map;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;

/**
 * The connector as a Spark plugin, for {@code spark-defaults.conf} or {@code --conf}: {@code
 * spark.plugins=io.npugather.spark.NpuGatherPlugin}. When an executor starts (in local mode: the
 * driver's JVM, which runs the tasks), it pays the JVM's one-time costs of a gather on a daemon
 * thread ({@link JvmWarmUp}) instead of inside the first gather's tasks. Optional: without it the
 * first gather of each executor pays them.
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
        JvmWarmUp.startInBackground();
      }
    };
  }
}
