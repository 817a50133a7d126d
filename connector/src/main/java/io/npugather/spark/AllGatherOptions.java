package io.npugather.spark;

import io.npugather.AllGatherParam;
import io.npugather.Backend;
import io.npugather.CommunicatorOptions;
import io.npugather.CommunicatorOptions.HostTransport;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
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
 * <p>The same options as a map use the keys of {@link #KEYS} ({@code npugather.backend}, ...), with
 * or without the {@code npugather.} prefix; Spark conf entries {@code spark.npugather.*} set
 * session-wide defaults ({@link #fromConf(Map)}, {@link NpuGatherConf}). Errors name a key as it
 * was written.
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

  /**
   * Testing aid: "RANK" or "RANK:ATTEMPT" makes that rank fail in that stage attempt (default 0).
   */
  public static final String INJECT_FAILURE = "npugather.test.injectFailure";

  /** Every key, in the order the docs list them. */
  public static final List<String> KEYS =
      List.of(
          BACKEND,
          RANK_SIZE,
          RANK_ROOT,
          COMM_DOMAIN,
          TIMEOUT,
          SOURCE_RANK_COLUMN,
          RESOURCE_NAME,
          RETRYABLE,
          HOST_TRANSPORT,
          INJECT_FAILURE);

  /** Prefix of the Spark conf entries that set defaults. */
  public static final String CONF_PREFIX = "spark.";

  /** Prefix of the keys of {@link #KEYS}, which a map of options may leave out. */
  public static final String KEY_PREFIX = "npugather.";

  /** What {@link #withRankSize} allows, in the words of its error. */
  static final String RANK_SIZE_ALLOWED =
      "0 (one rank per partition) or " + AllGatherParam.RANK_SIZE_ALLOWED;

  /** What {@link #withRankRoot} allows, in the words of its error. */
  static final String RANK_ROOT_ALLOWED =
      "0 <= rankRoot < rankSize <= " + AllGatherParam.MAX_RANK_SIZE;

  /** What {@link #withCommDomain} allows, in the words of its error. */
  static final String COMM_DOMAIN_ALLOWED =
      "at most "
          + (AllGatherParam.MAX_COMM_DOMAIN_LENGTH - 32)
          + " UTF-8 bytes (a run suffix is added)";

  /** What {@link #withTimeout} allows, in the words of its error. */
  static final String TIMEOUT_ALLOWED =
      CommunicatorOptions.TIMEOUT_ALLOWED + ", such as 120s, 5m or 500ms";

  private final Backend backend;
  private final int rankSize;
  private final int rankRoot;
  private final String commDomain;
  private final Duration timeout;
  private final String sourceRankColumn;
  private final String resourceName;
  private final boolean retryable;
  private final HostTransport hostTransport;
  private final String injectFailure;

  private AllGatherOptions(
      Backend backend,
      int rankSize,
      int rankRoot,
      String commDomain,
      Duration timeout,
      String sourceRankColumn,
      String resourceName,
      boolean retryable,
      HostTransport hostTransport,
      String injectFailure) {
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
   * Backend host ({@link Backend#SPARK_DEFAULT}: runs on any cluster), one rank per partition, root
   * rank 0, a fresh domain per run, timeout 120 s, column {@code source_rank}, resource {@code
   * npu}, not retryable, transport chosen automatically.
   */
  public static AllGatherOptions defaults() {
    return new AllGatherOptions(
        Backend.SPARK_DEFAULT,
        0,
        0,
        "",
        Duration.ofSeconds(120),
        "source_rank",
        "npu",
        false,
        HostTransport.AUTO,
        "");
  }

  /**
   * Defaults overridden by the {@code spark.npugather.*} entries of a Spark conf.
   *
   * @throws IllegalArgumentException naming the entry as written: a {@code spark.npugather.*} key
   *     that is no setting (with the nearest one), or a value that is not allowed
   */
  public static AllGatherOptions fromConf(Map<String, String> conf) {
    NpuGatherConf.requireKnownKeys(conf);
    Map<String, String> options = new LinkedHashMap<>();
    for (String key : KEYS) {
      String value = conf.get(CONF_PREFIX + key);
      if (value != null) {
        options.put(CONF_PREFIX + key, value);
      }
    }
    return defaults().with(options);
  }

  /**
   * A copy with the given entries applied. Keys are those of {@link #KEYS}, with or without their
   * {@code npugather.} prefix, or as Spark conf keys ({@code spark.npugather.backend}).
   *
   * @throws IllegalArgumentException naming the key as written: an unknown key (with the nearest
   *     one), or a value that is not allowed
   */
  public AllGatherOptions with(Map<String, String> options) {
    AllGatherOptions result = this;
    for (Map.Entry<String, String> entry : options.entrySet()) {
      result = result.with(entry.getKey(), entry.getValue());
    }
    return result;
  }

  /**
   * The key of {@link #KEYS} that {@code written} names ({@code backend}, {@code npugather.backend}
   * or {@code spark.npugather.backend}), or null.
   */
  static String optionKey(String written) {
    String key =
        written.startsWith(CONF_PREFIX + KEY_PREFIX)
            ? written.substring(CONF_PREFIX.length())
            : written.startsWith(KEY_PREFIX) ? written : KEY_PREFIX + written;
    return KEYS.contains(key) ? key : null;
  }

  private AllGatherOptions with(String written, String value) {
    Objects.requireNonNull(written, "option key");
    String key = optionKey(written);
    if (key == null) {
      throw unknownKey(written);
    }
    Objects.requireNonNull(value, written);
    return switch (key) {
      case BACKEND -> withBackend(value.trim().toLowerCase(Locale.ROOT), written);
      case RANK_SIZE -> withRankSize(parseInt(written, value), written);
      case RANK_ROOT -> withRankRoot(parseInt(written, value), written);
      case COMM_DOMAIN -> withCommDomain(value, written);
      case TIMEOUT -> withTimeout(parseDuration(written, value), written, "'" + value + "'");
      case SOURCE_RANK_COLUMN -> withSourceRankColumn(value, written);
      case RESOURCE_NAME -> withResourceName(value, written);
      case RETRYABLE -> withRetryable(parseBoolean(written, value));
      case HOST_TRANSPORT -> withHostTransport(parseTransport(written, value));
      case INJECT_FAILURE -> withInjectFailure(value, written);
      default -> throw new IllegalStateException("no setter for " + key);
    };
  }

  /** An unknown key, answered with the nearest known one in the form it was written in. */
  private static IllegalArgumentException unknownKey(String written) {
    String prefix =
        written.startsWith(CONF_PREFIX + KEY_PREFIX)
            ? CONF_PREFIX + KEY_PREFIX
            : written.startsWith(KEY_PREFIX) ? KEY_PREFIX : "";
    List<String> allowed =
        KEYS.stream().map(key -> prefix + key.substring(KEY_PREFIX.length())).toList();
    return new IllegalArgumentException(
        "option '"
            + written
            + "' is unknown; did you mean '"
            + NpuGatherConf.nearest(written, allowed)
            + "'? allowed: "
            + String.join(", ", allowed));
  }

  /** The backend named {@code backend}: "host", "hccl" or "lccl". */
  public AllGatherOptions withBackend(String backend) {
    return withBackend(backend, BACKEND);
  }

  private AllGatherOptions withBackend(String backend, String key) {
    return withBackend(
        Backend.forName(backend).orElseThrow(() -> invalid(key, backend, Backend.allowed())));
  }

  public AllGatherOptions withBackend(Backend backend) {
    Objects.requireNonNull(backend, BACKEND);
    return new AllGatherOptions(
        backend,
        rankSize,
        rankRoot,
        commDomain,
        timeout,
        sourceRankColumn,
        resourceName,
        retryable,
        hostTransport,
        injectFailure);
  }

  /**
   * 0: one rank per partition of the input; otherwise the input is repartitioned first. At most
   * {@link AllGatherParam#MAX_RANK_SIZE}, as the operator allows.
   */
  public AllGatherOptions withRankSize(int rankSize) {
    return withRankSize(rankSize, RANK_SIZE);
  }

  private AllGatherOptions withRankSize(int rankSize, String key) {
    if (rankSize < 0 || rankSize > AllGatherParam.MAX_RANK_SIZE) {
      throw invalid(key, rankSize, RANK_SIZE_ALLOWED);
    }
    return new AllGatherOptions(
        backend,
        rankSize,
        rankRoot,
        commDomain,
        timeout,
        sourceRankColumn,
        resourceName,
        retryable,
        hostTransport,
        injectFailure);
  }

  public AllGatherOptions withRankRoot(int rankRoot) {
    return withRankRoot(rankRoot, RANK_ROOT);
  }

  private AllGatherOptions withRankRoot(int rankRoot, String key) {
    if (rankRoot < 0 || rankRoot >= AllGatherParam.MAX_RANK_SIZE) {
      throw invalid(key, rankRoot, RANK_ROOT_ALLOWED);
    }
    return new AllGatherOptions(
        backend,
        rankSize,
        rankRoot,
        commDomain,
        timeout,
        sourceRankColumn,
        resourceName,
        retryable,
        hostTransport,
        injectFailure);
  }

  /**
   * "" (default): a fresh domain for every run, so concurrent jobs never collide. The run's domain
   * is this name and a suffix of at most 32 bytes, which the operator must accept: at most 96 UTF-8
   * bytes, no NUL character.
   */
  public AllGatherOptions withCommDomain(String commDomain) {
    return withCommDomain(commDomain, COMM_DOMAIN);
  }

  private AllGatherOptions withCommDomain(String commDomain, String key) {
    Objects.requireNonNull(commDomain, key);
    int bytes = commDomain.getBytes(StandardCharsets.UTF_8).length;
    if (bytes > AllGatherParam.MAX_COMM_DOMAIN_LENGTH - 32) {
      throw invalid(key, "of " + bytes + " UTF-8 bytes", COMM_DOMAIN_ALLOWED);
    }
    AllGatherParam.requireNoNul(key, commDomain);
    return new AllGatherOptions(
        backend,
        rankSize,
        rankRoot,
        commDomain,
        timeout,
        sourceRankColumn,
        resourceName,
        retryable,
        hostTransport,
        injectFailure);
  }

  /**
   * Bounds every wait: the rendezvous, communicator set-up and the collective. Positive, at most
   * {@link CommunicatorOptions#MAX_TIMEOUT} (30 days).
   */
  public AllGatherOptions withTimeout(Duration timeout) {
    return withTimeout(
        timeout, TIMEOUT, timeout == null ? null : SettingValues.durationText(timeout));
  }

  /** {@code written}: the value as the caller wrote it, for the error. */
  private AllGatherOptions withTimeout(Duration timeout, String key, Object written) {
    Objects.requireNonNull(timeout, key);
    if (!CommunicatorOptions.timeoutAllowed(timeout)) {
      throw invalid(key, written, TIMEOUT_ALLOWED);
    }
    return new AllGatherOptions(
        backend,
        rankSize,
        rankRoot,
        commDomain,
        timeout,
        sourceRankColumn,
        resourceName,
        retryable,
        hostTransport,
        injectFailure);
  }

  public AllGatherOptions withSourceRankColumn(String sourceRankColumn) {
    return withSourceRankColumn(sourceRankColumn, SOURCE_RANK_COLUMN);
  }

  private AllGatherOptions withSourceRankColumn(String sourceRankColumn, String key) {
    if (sourceRankColumn == null || sourceRankColumn.isBlank()) {
      throw invalid(key, "'" + sourceRankColumn + "'", "a non-blank column name");
    }
    return new AllGatherOptions(
        backend,
        rankSize,
        rankRoot,
        commDomain,
        timeout,
        sourceRankColumn,
        resourceName,
        retryable,
        hostTransport,
        injectFailure);
  }

  /** The Spark resource (e.g. {@code npu}) whose address is the rank's device id. */
  public AllGatherOptions withResourceName(String resourceName) {
    return withResourceName(resourceName, RESOURCE_NAME);
  }

  private AllGatherOptions withResourceName(String resourceName, String key) {
    if (resourceName == null || resourceName.isBlank()) {
      throw invalid(key, "'" + resourceName + "'", "a Spark resource name");
    }
    return new AllGatherOptions(
        backend,
        rankSize,
        rankRoot,
        commDomain,
        timeout,
        sourceRankColumn,
        resourceName,
        retryable,
        hostTransport,
        injectFailure);
  }

  /**
   * Retryable mode: the gathered rows pass through a shuffle, which makes the barrier stage a
   * shuffle-map stage that Spark retries whole when a rank fails. Costs one copy of the output.
   */
  public AllGatherOptions withRetryable(boolean retryable) {
    return new AllGatherOptions(
        backend,
        rankSize,
        rankRoot,
        commDomain,
        timeout,
        sourceRankColumn,
        resourceName,
        retryable,
        hostTransport,
        injectFailure);
  }

  public AllGatherOptions withHostTransport(HostTransport hostTransport) {
    Objects.requireNonNull(hostTransport, HOST_TRANSPORT);
    return new AllGatherOptions(
        backend,
        rankSize,
        rankRoot,
        commDomain,
        timeout,
        sourceRankColumn,
        resourceName,
        retryable,
        hostTransport,
        injectFailure);
  }

  /** Testing aid, see {@link #INJECT_FAILURE}. */
  public AllGatherOptions withInjectFailure(String spec) {
    return withInjectFailure(spec, INJECT_FAILURE);
  }

  private AllGatherOptions withInjectFailure(String spec, String key) {
    Objects.requireNonNull(spec, key);
    if (!spec.isEmpty() && !spec.matches("\\d{1,9}(:\\d{1,9})?")) {
      throw invalid(
          key, "'" + spec + "'", "\"\", \"RANK\" or \"RANK:ATTEMPT\" (each at most 9 digits)");
    }
    return new AllGatherOptions(
        backend,
        rankSize,
        rankRoot,
        commDomain,
        timeout,
        sourceRankColumn,
        resourceName,
        retryable,
        hostTransport,
        spec);
  }

  /** The backend's name ({@link Backend#wireName()}). */
  public String backend() {
    return backend.wireName();
  }

  public Backend backendType() {
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

  /**
   * The backend and every option that differs from {@link #defaults()}: a run on the host backend
   * shows no device words it does not use.
   */
  @Override
  public String toString() {
    AllGatherOptions d = defaults();
    StringBuilder text = new StringBuilder("AllGatherOptions{backend=").append(backend);
    appendIfChanged(text, "rankSize", rankSize, d.rankSize);
    appendIfChanged(text, "rankRoot", rankRoot, d.rankRoot);
    appendIfChanged(text, "commDomain", "'" + commDomain + "'", "'" + d.commDomain + "'");
    appendIfChanged(
        text,
        "timeout",
        SettingValues.durationText(timeout),
        SettingValues.durationText(d.timeout));
    appendIfChanged(text, "sourceRankColumn", sourceRankColumn, d.sourceRankColumn);
    appendIfChanged(text, "resourceName", resourceName, d.resourceName);
    appendIfChanged(text, "retryable", retryable, d.retryable);
    appendIfChanged(text, "hostTransport", hostTransport, d.hostTransport);
    appendIfChanged(text, "injectFailure", injectFailure, d.injectFailure);
    return text.append('}').toString();
  }

  private static void appendIfChanged(
      StringBuilder text, String name, Object value, Object defaultValue) {
    if (!value.equals(defaultValue)) {
      text.append(", ").append(name).append('=').append(value);
    }
  }
}
