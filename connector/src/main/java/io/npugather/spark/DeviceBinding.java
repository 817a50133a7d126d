package io.npugather.spark;

import java.io.Serializable;
import java.util.List;
import java.util.Map;
import org.apache.spark.TaskContext;
import org.apache.spark.resource.ResourceInformation;

/**
 * Where each rank of a run finds its device id, decided on the driver ({@link
 * ClusterCheck#requireDevices}) and shipped in the task closure.
 *
 * <p>On a cluster, a rank takes the first address of its task's Spark resource ({@code
 * TaskContext.resources()}). A local master gives tasks no custom resources, so there the driver's
 * own discovered addresses ({@code spark.driver.resource.NAME.*}) are shipped and rank r takes
 * address r.
 */
final class DeviceBinding implements Serializable {
  private static final long serialVersionUID = 1L;

  private final String resourceName;

  /** Rank r's device on a local master; null when the task's resources decide. */
  private final List<String> rankAddresses;

  private DeviceBinding(String resourceName, List<String> rankAddresses) {
    this.resourceName = resourceName;
    this.rankAddresses = rankAddresses == null ? null : List.copyOf(rankAddresses);
  }

  /** Each rank binds the first address of its task's resource {@code resourceName}, if any. */
  static DeviceBinding fromTaskResources(String resourceName) {
    return new DeviceBinding(resourceName, null);
  }

  /** Rank r binds {@code addresses.get(r)}, whatever the task's resources hold. */
  static DeviceBinding byRank(String resourceName, List<String> addresses) {
    return new DeviceBinding(resourceName, addresses);
  }

  /** True when rank r binds the driver's address r (local masters). */
  boolean byRank() {
    return rankAddresses != null;
  }

  /**
   * This rank's device id, or -1 when it has none (backend host without a resource).
   *
   * @throws IllegalStateException when the address is not a device id (an integer)
   */
  int deviceId(TaskContext context) {
    String address;
    if (rankAddresses != null) {
      address = rankAddresses.get(context.partitionId());
    } else {
      Map<String, ResourceInformation> resources = context.resourcesJMap();
      ResourceInformation device = resources.get(resourceName);
      if (device == null || device.addresses().length == 0) {
        return -1;
      }
      address = device.addresses()[0];
    }
    return parseDeviceId(resourceName, address);
  }

  static int parseDeviceId(String resourceName, String address) {
    try {
      int id = Integer.parseInt(address.trim());
      if (id >= 0) {
        return id;
      }
    } catch (NumberFormatException e) {
      // reported below
    }
    throw new IllegalStateException(
        "Spark resource '"
            + resourceName
            + "' gave address '"
            + address
            + "'; a device id (an integer >= 0) is needed");
  }

  @Override
  public String toString() {
    return rankAddresses == null
        ? "task resource '" + resourceName + "'"
        : "driver's '" + resourceName + "' addresses by rank " + rankAddresses;
  }
}
