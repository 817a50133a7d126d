package io.npugather.spark.rendezvous;

import java.net.InetAddress;
import java.net.UnknownHostException;
import org.apache.spark.SparkConf;

/**
 * Where the rendezvous service listens and what the tasks are told to reach: loopback on a local
 * master; on a cluster {@code spark.driver.bindAddress} (else {@code spark.driver.host}, else the
 * local host), advertised as {@code spark.driver.host} when set.
 *
 * @param bind the address to bind
 * @param description the bind address as an error names it
 * @param advertisedHost the host the tickets carry
 */
record DriverAddress(InetAddress bind, String description, String advertisedHost) {

  /** The service's address for an application with this configuration. */
  static DriverAddress of(SparkConf conf) {
    String master = conf.get("spark.master", "");
    if (master.equals("local") || master.startsWith("local[")) {
      return standalone(InetAddress.getLoopbackAddress());
    }
    String bind = conf.get("spark.driver.bindAddress", null);
    String host = conf.get("spark.driver.host", null);
    InetAddress bindAddress;
    InetAddress advertised;
    try {
      bindAddress =
          bind != null && !bind.isEmpty()
              ? InetAddress.getByName(bind)
              : host != null && !host.isEmpty()
                  ? InetAddress.getByName(host)
                  : InetAddress.getLocalHost();
      advertised = bindAddress.isAnyLocalAddress() ? InetAddress.getLocalHost() : bindAddress;
    } catch (UnknownHostException e) {
      throw new IllegalStateException(
          "cannot resolve the driver address for the rendezvous service "
              + "(spark.driver.bindAddress="
              + bind
              + ", spark.driver.host="
              + host
              + "): "
              + e.getMessage(),
          e);
    }
    return new DriverAddress(
        bindAddress,
        advertised.getHostAddress(),
        host != null && !host.isEmpty() ? host : advertised.getHostAddress());
  }

  /** Bound to and advertised as {@code address} (local masters, tests, benchmarks). */
  static DriverAddress standalone(InetAddress address) {
    return new DriverAddress(address, address.getHostAddress(), address.getHostAddress());
  }
}
