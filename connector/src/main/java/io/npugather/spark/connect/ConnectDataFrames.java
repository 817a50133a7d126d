package io.npugather.spark.connect;

import org.apache.spark.sql.Dataset;

/**
 * Tells a DataFrame of Spark Connect's client from a classic one without loading a class of either
 * API: {@link ConnectGather} names Connect's classes, so the JVM may load them when it loads that
 * class, and a classic application need not have them.
 */
public final class ConnectDataFrames {
  private ConnectDataFrames() {}

  /** Whether {@code df} is a DataFrame of Spark Connect's client, by its class's name. */
  public static boolean isConnect(Dataset<?> df) {
    return df.getClass().getName().startsWith("org.apache.spark.sql.connect.");
  }
}
