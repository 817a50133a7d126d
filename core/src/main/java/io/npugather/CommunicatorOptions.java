package io.npugather;

import java.time.Duration;
import java.util.Objects;

/**
 * How a communicator runs, beyond the operator's parameters: its timeout (every blocking wait is
 * bounded by it), its device, and which host transport it may use.
 */
public final class CommunicatorOptions {
  /** Which transport the host backend may pick. */
  public enum HostTransport {
    /** Shared memory between ranks of one host, the TCP ring across hosts. */
    AUTO,
    /** The TCP ring even on one host. */
    TCP,
    /** Shared memory by staging copies only (no cross-memory attach). */
    STAGING
  }

  public static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(120);

  /**
   * Longest timeout: 30 days. Every wait of a communicator, and of the Spark layer's rendezvous, is
   * bounded by it; HCCL bounds its own waits further (HCCL_CONNECT_TIMEOUT at most 7200 s,
   * HCCL_EXEC_TIMEOUT at most 17340 s).
   */
  public static final Duration MAX_TIMEOUT = Duration.ofDays(30);

  /** What {@link #withTimeout} allows, in the words of its error. */
  public static final String TIMEOUT_ALLOWED = "a positive duration of at most 30 days (720h)";

  private final Duration timeout;
  private final int deviceId;
  private final HostTransport hostTransport;
  private final String bindAddress;

  private CommunicatorOptions(
      Duration timeout, int deviceId, HostTransport hostTransport, String bindAddress) {
    this.timeout = timeout;
    this.deviceId = deviceId;
    this.hostTransport = hostTransport;
    this.bindAddress = bindAddress;
  }

  /** Timeout 120 s, no device, transport chosen automatically. */
  public static CommunicatorOptions defaults() {
    return new CommunicatorOptions(DEFAULT_TIMEOUT, -1, HostTransport.AUTO, null);
  }

  /**
   * Bounds every blocking wait of the communicator.
   *
   * @throws IllegalArgumentException when {@code timeout} is not positive or longer than {@link
   *     #MAX_TIMEOUT}
   */
  public CommunicatorOptions withTimeout(Duration timeout) {
    Objects.requireNonNull(timeout, "timeout");
    if (!timeoutAllowed(timeout)) {
      throw new IllegalArgumentException(
          "timeout = " + timeout + " is invalid; allowed: " + TIMEOUT_ALLOWED);
    }
    return new CommunicatorOptions(timeout, deviceId, hostTransport, bindAddress);
  }

  /** True when {@code timeout} is positive and at most {@link #MAX_TIMEOUT}. */
  public static boolean timeoutAllowed(Duration timeout) {
    return !timeout.isNegative() && !timeout.isZero() && timeout.compareTo(MAX_TIMEOUT) <= 0;
  }

  /** The NPU this rank uses ({@code -1}: none, as for the host backend). */
  public CommunicatorOptions withDeviceId(int deviceId) {
    if (deviceId < -1) {
      throw new IllegalArgumentException("deviceId = " + deviceId + "; allowed: -1 (none) or >= 0");
    }
    return new CommunicatorOptions(timeout, deviceId, hostTransport, bindAddress);
  }

  public CommunicatorOptions withHostTransport(HostTransport hostTransport) {
    Objects.requireNonNull(hostTransport, "hostTransport");
    return new CommunicatorOptions(timeout, deviceId, hostTransport, bindAddress);
  }

  /**
   * The address the root rank's endpoint binds to (host backend); null picks this host's first
   * non-loopback address.
   */
  public CommunicatorOptions withBindAddress(String bindAddress) {
    return new CommunicatorOptions(timeout, deviceId, hostTransport, bindAddress);
  }

  public Duration timeout() {
    return timeout;
  }

  public int deviceId() {
    return deviceId;
  }

  public HostTransport hostTransport() {
    return hostTransport;
  }

  public String bindAddress() {
    return bindAddress;
  }
}
