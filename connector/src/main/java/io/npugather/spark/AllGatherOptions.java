package io.npugather.spark;

import io.npugather.AllGatherParam;
import io.npugather.CommunicatorOptions.HostTransport;
import java.io.Serializable;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import org.apache.spark.network.util.JavaUtils;

/**
 * Options of {@code allGatherOnNpu}. Immutable; every {@code with...} returns a copy.
 *
 * <p>The same options as a map use the keys of {@link #KEYS} ({@code npugather.backend}, ...);
 * Spark conf entries {@code spark.npugather.*} set session-wide defaults ({@link
 * #fromConf(Map)}).
 */
public final class AllGatherOptions implements Serializable {
  private static final long serialVersionUID = 1L;

  public static final String BACKEND = "npugather.backend";
  public static final String RANK_SIZE = "npugather.rankSize";
  public static final String RANK_ROOT = "npugather.rankRoot";
  public static final String COMM_DOMAIN = "npugather.commDomain";
  public static final String TIMEOUT = "npugather.timeout";
  public static final String SOURCE_RANK_COLUMN = "npugather.sourceRankColumn";
  public static final String RESOURCE_NAME = "npugather.resourceName";
  public static final String RETRYABLE = "npugather.retryable";
  public static final String HOST_TRANSPORT = "npugather.hostTransport";
  /** Testing aid: "RANK" or "RANK:ATTEMPT" makes that rank fail in that stage attempt (default 0). */
  public static final String INJECT_FAILURE = "npugather.test.injectFailure";

  /** Every key, in the order the docs list them. */
  public static final List<String> KEYS = List.of(BACKEND, RANK_SIZE, RANK_ROOT, COMM_DOMAIN,
      TIMEOUT, SOURCE_RANK_COLUMN, RESOURCE_NAME, RETRYABLE, HOST_TRANSPORT, INJECT_FAILURE);

  /** Prefix of the Spark conf entries that set defaults. */
  public static final String CONF_PREFIX = "spark.";

  private final String backend;
  private final int rankSize;
  private final int rankRoot;
  private final String commDomain;
  private final Duration timeout;
  private final String sourceRankColumn;
  private final String resourceName;
  private final boolean retryable;
  private final HostTransport hostTransport;
  private final String injectFailure;

  private AllGatherOptions(String backend, int rankSize, int rankRoot, String commDomain,
      Duration timeout, String sourceRankColumn, String resourceName, boolean retryable,
      HostTransport hostTransport, String injectFailure) {
    this.backend = backend;
    this.rankSize = rankSize;
    this.rankRoot = rankRoot;
    this.commDomain = commDomain;
    this.timeout = timeout;
    this.sourceRankColumn = sourceRankColumn;
    this.resourceName = resourceName;
    this.retryable = retryable;
    this.hostTransport = hostTransport;
    this.injectFailure = injectFailure;
  }

  /**
   * Backend host, one rank per partition, root rank 0, a fresh domain per run, timeout 120 s,
   * column {@code source_rank}, resource {@code npu}, not retryable, transport chosen
   * automatically.
   */
  public static AllGatherOptions defaults() {
    return new AllGatherOptions("host", 0, 0, "", Duration.ofSeconds(120), "source_rank", "npu",
        false, HostTransport.AUTO, "");
  }

  /** Defaults overridden by {@code spark.npugather.*} entries of a Spark conf. */
  public static AllGatherOptions fromConf(Map<String, String> conf) {
    Map<String, String> options = new LinkedHashMap<>();
    for (String key : KEYS) {
      String value = conf.get(CONF_PREFIX + key);
      if (value != null) {
        options.put(key, value);
      }
    }
    return defaults().with(options);
  }

  /** A copy with the given {@code npugather.*} entries applied; unknown keys are an error. */
  public AllGatherOptions with(Map<String, String> options) {
    AllGatherOptions result = this;
    for (Map.Entry<String, String> entry : options.entrySet()) {
      result = result.with(entry.getKey(), entry.getValue());
    }
    return result;
  }

  private AllGatherOptions with(String key, String value) {
    Objects.requireNonNull(value, key);
    return switch (key) {
      case BACKEND -> withBackend(value.trim().toLowerCase(Locale.ROOT));
      case RANK_SIZE -> withRankSize(parseInt(key, value));
      case RANK_ROOT -> withRankRoot(parseInt(key, value));
      case COMM_DOMAIN -> withCommDomain(value);
      case TIMEOUT -> withTimeout(parseDuration(key, value));
      case SOURCE_RANK_COLUMN -> withSourceRankColumn(value);
      case RESOURCE_NAME -> withResourceName(value);
      case RETRYABLE -> withRetryable(parseBoolean(key, value));
      case HOST_TRANSPORT -> withHostTransport(parseTransport(key, value));
      case INJECT_FAILURE -> withInjectFailure(value);
      default -> throw new IllegalArgumentException(
          "option '" + key + "' is unknown; allowed: " + KEYS);
    };
  }

  public AllGatherOptions withBackend(String backend) {
    if (!AllGatherParam.BACKENDS.contains(backend)) {
      throw invalid(BACKEND, backend, "one of " + AllGatherParam.BACKENDS);
    }
    return new AllGatherOptions(backend, rankSize, rankRoot, commDomain, timeout,
        sourceRankColumn, resourceName, retryable, hostTransport, injectFailure);
  }

  /** 0: one rank per partition of the input; otherwise the input is repartitioned first. */
  public AllGatherOptions withRankSize(int rankSize) {
    if (rankSize < 0) {
      throw invalid(RANK_SIZE, rankSize, "0 (one rank per partition) or a positive count");
    }
    return new AllGatherOptions(backend, rankSize, rankRoot, commDomain, timeout,
        sourceRankColumn, resourceName, retryable, hostTransport, injectFailure);
  }

  public AllGatherOptions withRankRoot(int rankRoot) {
    if (rankRoot < 0) {
      throw invalid(RANK_ROOT, rankRoot, "0 <= rankRoot < rankSize");
    }
    return new AllGatherOptions(backend, rankSize, rankRoot, commDomain, timeout,
        sourceRankColumn, resourceName, retryable, hostTransport, injectFailure);
  }

  /** "" (default): a fresh domain for every run, so concurrent jobs never collide. */
  public AllGatherOptions withCommDomain(String commDomain) {
    Objects.requireNonNull(commDomain, COMM_DOMAIN);
    if (commDomain.length() > AllGatherParam.MAX_COMM_DOMAIN_LENGTH - 32) {
      throw invalid(COMM_DOMAIN, "of length " + commDomain.length(), "at most "
          + (AllGatherParam.MAX_COMM_DOMAIN_LENGTH - 32) + " characters (a run suffix is added)");
    }
    return new AllGatherOptions(backend, rankSize, rankRoot, commDomain, timeout,
        sourceRankColumn, resourceName, retryable, hostTransport, injectFailure);
  }

  /** Bounds every wait: the rendezvous, communicator set-up and the collective. */
  public AllGatherOptions withTimeout(Duration timeout) {
    Objects.requireNonNull(timeout, TIMEOUT);
    if (timeout.isZero() || timeout.isNegative()) {
      throw invalid(TIMEOUT, timeout, "a positive duration");
    }
    return new AllGatherOptions(backend, rankSize, rankRoot, commDomain, timeout,
        sourceRankColumn, resourceName, retryable, hostTransport, injectFailure);
  }

  public AllGatherOptions withSourceRankColumn(String sourceRankColumn) {
    if (sourceRankColumn == null || sourceRankColumn.isBlank()) {
      throw invalid(SOURCE_RANK_COLUMN, "'" + sourceRankColumn + "'", "a non-blank column name");
    }
    return new AllGatherOptions(backend, rankSize, rankRoot, commDomain, timeout,
        sourceRankColumn, resourceName, retryable, hostTransport, injectFailure);
  }

  /** The Spark resource (e.g. {@code npu}) whose address is the rank's device id. */
  public AllGatherOptions withResourceName(String resourceName) {
    if (resourceName == null || resourceName.isBlank()) {
      throw invalid(RESOURCE_NAME, "'" + resourceName + "'", "a Spark resource name");
    }
    return new AllGatherOptions(backend, rankSize, rankRoot, commDomain, timeout,
        sourceRankColumn, resourceName, retryable, hostTransport, injectFailure);
  }

  /**
   * Retryable mode: the gathered rows pass through a shuffle, which makes the barrier stage a
   * shuffle-map stage that Spark retries whole when a rank fails. Costs one copy of the output.
   */
  public AllGatherOptions withRetryable(boolean retryable) {
    return new AllGatherOptions(backend, rankSize, rankRoot, commDomain, timeout,
        sourceRankColumn, resourceName, retryable, hostTransport, injectFailure);
  }

  public AllGatherOptions withHostTransport(HostTransport hostTransport) {
    Objects.requireNonNull(hostTransport, HOST_TRANSPORT);
    return new AllGatherOptions(backend, rankSize, rankRoot, commDomain, timeout,
        sourceRankColumn, resourceName, retryable, hostTransport, injectFailure);
  }

  /** Testing aid, see {@link #INJECT_FAILURE}. */
  public AllGatherOptions withInjectFailure(String spec) {
    Objects.requireNonNull(spec, INJECT_FAILURE);
    if (!spec.isEmpty() && !spec.matches("\\d+(:\\d+)?")) {
      throw invalid(INJECT_FAILURE, "'" + spec + "'", "\"\", \"RANK\" or \"RANK:ATTEMPT\"");
    }
    return new AllGatherOptions(backend, rankSize, rankRoot, commDomain, timeout,
        sourceRankColumn, resourceName, retryable, hostTransport, spec);
  }

  public String backend() {
    return backend;
  }

  public int rankSize() {
    return rankSize;
  }

  public int rankRoot() {
    return rankRoot;
  }

  public String commDomain() {
    return commDomain;
  }

  public Duration timeout() {
    return timeout;
  }

  public String sourceRankColumn() {
    return sourceRankColumn;
  }

  public String resourceName() {
    return resourceName;
  }

  public boolean retryable() {
    return retryable;
  }

  public HostTransport hostTransport() {
    return hostTransport;
  }

  /** True when the options ask this rank to fail in this stage attempt. */
  boolean failureInjectedFor(int rank, int stageAttempt) {
    if (injectFailure.isEmpty()) {
      return false;
    }
    String[] parts = injectFailure.split(":");
    int attempt = parts.length > 1 ? Integer.parseInt(parts[1]) : 0;
    return Integer.parseInt(parts[0]) == rank && attempt == stageAttempt;
  }

  private static int parseInt(String key, String value) {
    try {
      return Integer.parseInt(value.trim());
    } catch (NumberFormatException e) {
      throw invalid(key, "'" + value + "'", "an integer");
    }
  }

  private static boolean parseBoolean(String key, String value) {
    return switch (value.trim().toLowerCase(Locale.ROOT)) {
      case "true" -> true;
      case "false" -> false;
      default -> throw invalid(key, "'" + value + "'", "true or false");
    };
  }

  static Duration parseDuration(String key, String value) {
    try {
      return Duration.ofMillis(JavaUtils.timeStringAsMs(value.trim()));
    } catch (NumberFormatException e) {
      throw invalid(key, "'" + value + "'", "a duration such as 120s, 5m or 500ms");
    }
  }

  private static HostTransport parseTransport(String key, String value) {
    try {
      return HostTransport.valueOf(value.trim().toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException e) {
      throw invalid(key, "'" + value + "'", "auto, tcp or staging");
    }
  }

  static IllegalArgumentException invalid(String key, Object value, String allowed) {
    return new IllegalArgumentException(key + " = " + value + " is invalid; allowed: " + allowed);
  }

  @Override
  public String toString() {
    return "AllGatherOptions{backend=" + backend + ", rankSize=" + rankSize + ", rankRoot="
        + rankRoot + ", commDomain='" + commDomain + "', timeout=" + timeout
        + ", sourceRankColumn=" + sourceRankColumn + ", resourceName=" + resourceName
        + ", retryable=" + retryable + ", hostTransport=" + hostTransport + "}";
  }
}
