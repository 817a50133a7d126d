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
import java.util.Map;
import java.util.Objects;

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

  static final Setting<Backend> BACKEND_OPTION =
      Setting.option(BACKEND, Setting.BACKEND)
          .doc(
              "`host` (CPU collective), `hccl` or `lccl` (Ascend NPUs). The default is `host`, not"
                  + " the operator's `hccl`, so that a call without options runs on any cluster: a"
                  + " device backend is refused before the job starts where the tasks have no NPU")
          .allowed(Backend.allowed())
          .check((key, backend, written) -> Objects.requireNonNull(backend, key))
          .createWithDefault(Backend.SPARK_DEFAULT);

  static final Setting<Integer> RANK_SIZE_OPTION =
      Setting.option(RANK_SIZE, Setting.INTEGER)
          .doc(
              "0: one rank per input partition; N: repartition the input to N partitions first."
                  + " The operator's range, `1 <= rankSize <= 65536`, holds for both: more is"
                  + " refused at the call (N) or when the gather is planned (partitions), before"
                  + " the cluster check and any job")
          .allowed(RANK_SIZE_ALLOWED)
          .check(
              (key, rankSize, written) -> {
                if (rankSize < 0 || rankSize > AllGatherParam.MAX_RANK_SIZE) {
                  throw invalid(key, rankSize, RANK_SIZE_ALLOWED);
                }
              })
          .createWithDefault(0);

  static final Setting<Integer> RANK_ROOT_OPTION =
      Setting.option(RANK_ROOT, Setting.INTEGER)
          .doc("the rank that creates the communicator's root info: `0 <= rankRoot < rankSize`")
          .allowed(RANK_ROOT_ALLOWED)
          .check(
              (key, rankRoot, written) -> {
                if (rankRoot < 0 || rankRoot >= AllGatherParam.MAX_RANK_SIZE) {
                  throw invalid(key, rankRoot, RANK_ROOT_ALLOWED);
                }
              })
          .createWithDefault(0);

  static final Setting<String> COMM_DOMAIN_OPTION =
      Setting.option(COMM_DOMAIN, Setting.STRING)
          .doc(
              "communication domain name, at most 96 UTF-8 bytes and no NUL character (the"
                  + " operator's 128 bytes less the run suffix); a unique suffix is added for every"
                  + " run so concurrent jobs never collide")
          .allowed(COMM_DOMAIN_ALLOWED)
          .check(
              (key, commDomain, written) -> {
                Objects.requireNonNull(commDomain, key);
                int bytes = commDomain.getBytes(StandardCharsets.UTF_8).length;
                if (bytes > AllGatherParam.MAX_COMM_DOMAIN_LENGTH - 32) {
                  throw invalid(key, "of " + bytes + " UTF-8 bytes", COMM_DOMAIN_ALLOWED);
                }
                AllGatherParam.requireNoNul(key, commDomain);
              })
          .shownAs(commDomain -> "'" + commDomain + "'")
          .createWithDefault("");

  static final Setting<Duration> TIMEOUT_OPTION =
      Setting.option(TIMEOUT, Setting.DURATION)
          .doc(
              "bounds every wait: rendezvous, communicator set-up, the collective (`500ms`, `30s`,"
                  + " `5m`, ...); positive and at most `30d` (the operator's"
                  + " `CommunicatorOptions.MAX_TIMEOUT`; HCCL bounds its own waits further, see"
                  + " npu.md)")
          .allowed(TIMEOUT_ALLOWED)
          .check(
              (key, timeout, written) -> {
                Objects.requireNonNull(timeout, key);
                if (!CommunicatorOptions.timeoutAllowed(timeout)) {
                  throw invalid(
                      key,
                      written != null ? "'" + written + "'" : SettingValues.durationText(timeout),
                      TIMEOUT_ALLOWED);
                }
              })
          .createWithDefaultString("120s");

  static final Setting<String> SOURCE_RANK_COLUMN_OPTION =
      Setting.option(SOURCE_RANK_COLUMN, Setting.STRING)
          .doc("name of the source-rank column; must not collide with an input column")
          .allowed("a non-blank column name")
          .check(
              (key, column, written) -> {
                if (column == null || column.isBlank()) {
                  throw invalid(key, "'" + column + "'", "a non-blank column name");
                }
              })
          .createWithDefault("source_rank");

  static final Setting<String> RESOURCE_NAME_OPTION =
      Setting.option(RESOURCE_NAME, Setting.STRING)
          .doc(
              "the Spark resource that holds the devices: the first address of the task's resource"
                  + " on a cluster, the driver's address r for rank r on a local master (see"
                  + " Cluster requirements)")
          .allowed("a Spark resource name")
          .check(
              (key, name, written) -> {
                if (name == null || name.isBlank()) {
                  throw invalid(key, "'" + name + "'", "a Spark resource name");
                }
              })
          .createWithDefault("npu");

  static final Setting<Boolean> RETRYABLE_OPTION =
      Setting.option(RETRYABLE, Setting.BOOLEAN)
          .doc(
              "let Spark run a failed gather again (see below); `false` fails the job at the first"
                  + " failed attempt")
          .allowed("true or false")
          .createWithDefault(false);

  static final Setting<HostTransport> HOST_TRANSPORT_OPTION =
      Setting.option(HOST_TRANSPORT, Setting.HOST_TRANSPORT)
          .doc(
              "host backend: `auto` (shared memory on one host; across hosts `tcp-hier` when every"
                  + " host runs the same number, 2 or more, of ranks, else the flat TCP transport),"
                  + " `tcp` (the flat TCP transport everywhere), `staging`")
          .allowed("auto, tcp or staging")
          .check((key, transport, written) -> Objects.requireNonNull(transport, key))
          .shownAs(HostTransport::name)
          .createWithDefault(HostTransport.AUTO);

  private static final String INJECT_FAILURE_ALLOWED =
      "\"\", \"RANK\" or \"RANK:ATTEMPT\" (each at most 9 digits)";

  static final Setting<String> INJECT_FAILURE_OPTION =
      Setting.option(INJECT_FAILURE, Setting.STRING)
          .doc(
              "testing aid: `RANK` or `RANK:ATTEMPT` (each at most 9 digits) makes that rank fail"
                  + " in that stage attempt")
          .allowed(INJECT_FAILURE_ALLOWED)
          .check(
              (key, spec, written) -> {
                Objects.requireNonNull(spec, key);
                if (!spec.isEmpty() && !spec.matches("\\d{1,9}(:\\d{1,9})?")) {
                  throw invalid(key, "'" + spec + "'", INJECT_FAILURE_ALLOWED);
                }
              })
          .createWithDefault("");

  /** Every option, in the order the docs list them. */
  static final List<Setting<?>> OPTIONS =
      List.of(
          BACKEND_OPTION,
          RANK_SIZE_OPTION,
          RANK_ROOT_OPTION,
          COMM_DOMAIN_OPTION,
          TIMEOUT_OPTION,
          SOURCE_RANK_COLUMN_OPTION,
          RESOURCE_NAME_OPTION,
          RETRYABLE_OPTION,
          HOST_TRANSPORT_OPTION,
          INJECT_FAILURE_OPTION);

  /** Every key, in the order the docs list them. */
  public static final List<String> KEYS = OPTIONS.stream().map(Setting::key).toList();

  private static final AllGatherOptions DEFAULTS =
      new AllGatherOptions(OPTIONS.stream().map(Setting::defaultValue).toArray());

  /** The value of every option, in the order of {@link #OPTIONS}. */
  private final Object[] values;

  private AllGatherOptions(Object[] values) {
    this.values = values;
  }

  /**
   * Backend host ({@link Backend#SPARK_DEFAULT}: runs on any cluster), one rank per partition, root
   * rank 0, a fresh domain per run, timeout 120 s, column {@code source_rank}, resource {@code
   * npu}, not retryable, transport chosen automatically.
   */
  public static AllGatherOptions defaults() {
    return DEFAULTS;
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
    for (Setting<?> option : OPTIONS) {
      String value = conf.get(option.confKey());
      if (value != null) {
        options.put(option.confKey(), value);
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
    Object[] changed = values.clone();
    for (Map.Entry<String, String> entry : options.entrySet()) {
      String written = Objects.requireNonNull(entry.getKey(), "option key");
      int index = KEYS.indexOf(optionKey(written));
      if (index < 0) {
        throw unknownKey(written);
      }
      changed[index] = OPTIONS.get(index).read(written, entry.getValue());
    }
    return new AllGatherOptions(changed);
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

  /** A copy with {@code option} set to {@code value}, once checked. */
  private <T> AllGatherOptions with(Setting<T> option, T value) {
    Object[] changed = values.clone();
    changed[OPTIONS.indexOf(option)] = option.checked(value);
    return new AllGatherOptions(changed);
  }

  /** The value of {@code option}, one of {@link #OPTIONS}. */
  <T> T get(Setting<T> option) {
    @SuppressWarnings("unchecked")
    T value = (T) values[OPTIONS.indexOf(option)];
    return value;
  }

  /** The backend named {@code backend}: "host", "hccl" or "lccl". */
  public AllGatherOptions withBackend(String backend) {
    Objects.requireNonNull(backend, BACKEND);
    return with(BACKEND_OPTION, BACKEND_OPTION.type().parse(BACKEND, backend));
  }

  public AllGatherOptions withBackend(Backend backend) {
    return with(BACKEND_OPTION, backend);
  }

  /**
   * 0: one rank per partition of the input; otherwise the input is repartitioned first. At most
   * {@link AllGatherParam#MAX_RANK_SIZE}, as the operator allows.
   */
  public AllGatherOptions withRankSize(int rankSize) {
    return with(RANK_SIZE_OPTION, rankSize);
  }

  public AllGatherOptions withRankRoot(int rankRoot) {
    return with(RANK_ROOT_OPTION, rankRoot);
  }

  /**
   * "" (default): a fresh domain for every run, so concurrent jobs never collide. The run's domain
   * is this name and a suffix of at most 32 bytes, which the operator must accept: at most 96 UTF-8
   * bytes, no NUL character.
   */
  public AllGatherOptions withCommDomain(String commDomain) {
    return with(COMM_DOMAIN_OPTION, commDomain);
  }

  /**
   * Bounds every wait: the rendezvous, communicator set-up and the collective. Positive, at most
   * {@link CommunicatorOptions#MAX_TIMEOUT} (30 days).
   */
  public AllGatherOptions withTimeout(Duration timeout) {
    return with(TIMEOUT_OPTION, timeout);
  }

  public AllGatherOptions withSourceRankColumn(String sourceRankColumn) {
    return with(SOURCE_RANK_COLUMN_OPTION, sourceRankColumn);
  }

  /** The Spark resource (e.g. {@code npu}) whose address is the rank's device id. */
  public AllGatherOptions withResourceName(String resourceName) {
    return with(RESOURCE_NAME_OPTION, resourceName);
  }

  /**
   * Retryable mode: the gathered rows pass through a shuffle, which makes the barrier stage a
   * shuffle-map stage that Spark retries whole when a rank fails. Costs one copy of the output.
   */
  public AllGatherOptions withRetryable(boolean retryable) {
    return with(RETRYABLE_OPTION, retryable);
  }

  public AllGatherOptions withHostTransport(HostTransport hostTransport) {
    return with(HOST_TRANSPORT_OPTION, hostTransport);
  }

  /** Testing aid, see {@link #INJECT_FAILURE}. */
  public AllGatherOptions withInjectFailure(String spec) {
    return with(INJECT_FAILURE_OPTION, spec);
  }

  /** The backend's name ({@link Backend#wireName()}). */
  public String backend() {
    return get(BACKEND_OPTION).wireName();
  }

  public Backend backendType() {
    return get(BACKEND_OPTION);
  }

  public int rankSize() {
    return get(RANK_SIZE_OPTION);
  }

  public int rankRoot() {
    return get(RANK_ROOT_OPTION);
  }

  public String commDomain() {
    return get(COMM_DOMAIN_OPTION);
  }

  public Duration timeout() {
    return get(TIMEOUT_OPTION);
  }

  public String sourceRankColumn() {
    return get(SOURCE_RANK_COLUMN_OPTION);
  }

  public String resourceName() {
    return get(RESOURCE_NAME_OPTION);
  }

  public boolean retryable() {
    return get(RETRYABLE_OPTION);
  }

  public HostTransport hostTransport() {
    return get(HOST_TRANSPORT_OPTION);
  }

  /** True when the options ask this rank to fail in this stage attempt. */
  boolean failureInjectedFor(int rank, int stageAttempt) {
    String injectFailure = get(INJECT_FAILURE_OPTION);
    if (injectFailure.isEmpty()) {
      return false;
    }
    String[] parts = injectFailure.split(":");
    int attempt = parts.length > 1 ? Integer.parseInt(parts[1]) : 0;
    return Integer.parseInt(parts[0]) == rank && attempt == stageAttempt;
  }

  /**
   * Checks {@link #rankRoot()} against the ranks of a run: its {@code rankSize}, or the input's
   * number of partitions when {@code rankSize} is 0.
   *
   * @throws IllegalArgumentException naming rankRoot, its value and the run's rankSize
   */
  void requireRootAmong(int rankSize) {
    if (rankRoot() >= rankSize) {
      throw invalid(RANK_ROOT, rankRoot(), "0 <= rankRoot < rankSize (" + rankSize + ")");
    }
  }

  static IllegalArgumentException invalid(String key, Object value, String allowed) {
    return Setting.invalid(key, value, allowed);
  }

  /**
   * The backend and every option that differs from {@link #defaults()}: a run on the host backend
   * shows no device words it does not use.
   */
  @Override
  public String toString() {
    StringBuilder text = new StringBuilder("AllGatherOptions{backend=").append(backendType());
    for (Setting<?> option : OPTIONS.subList(1, OPTIONS.size())) {
      appendIfChanged(text, option);
    }
    return text.append('}').toString();
  }

  private <T> void appendIfChanged(StringBuilder text, Setting<T> option) {
    T value = get(option);
    if (!value.equals(option.defaultValue())) {
      String name = option.key().substring(option.key().lastIndexOf('.') + 1);
      text.append(", ").append(name).append('=').append(option.shown(value));
    }
  }
}
