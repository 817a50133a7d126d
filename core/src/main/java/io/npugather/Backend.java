package io.npugather;

import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * A communication backend: its name, as options, the C ABI and {@link RootInfo}'s text write it,
 * and the properties the library branches on: it asks a backend what it does, never compares names.
 * The native core keeps the same names in its registry ({@code core/backend.cc}), in the same
 * order; a test compares the two lists. A new backend is a constant here, a folder of the native
 * core and its entry in that registry.
 *
 * <p>Two defaults, for two kinds of caller. The operator ({@link AllGatherParam}) defaults to
 * {@link #OPERATOR_DEFAULT}, {@code hccl}: the vendor's AllGatherOperation contract gives its
 * {@code backend} field that default, and code written against the contract relies on it. The Spark
 * layer ({@code allGatherOnNpu}, {@code spark.npugather.backend}) defaults to {@link
 * #SPARK_DEFAULT}, {@code host}: a call without options must run on any Spark cluster, and a device
 * backend is refused before the job starts where the tasks have no NPU.
 */
public enum Backend {
  /** HCCL, the vendor's collective library: NPUs on one node or many. */
  HCCL(
      "hccl",
      List.of("hccl"),
      Trait.NEEDS_DEVICE,
      Trait.TIMEOUT_AT_ROOT_INFO,
      Trait.RANK_TABLE_FILE),
  /** LCCL (the vendor's LCAL library): the NPUs of one node. */
  LCCL("lccl", List.of("lccl"), Trait.NEEDS_DEVICE, Trait.SINGLE_NODE, Trait.NUMBERED_DOMAIN),
  /** The CPU collective: shared memory between ranks of one host, TCP across hosts. */
  HOST("host", List.of("executor", "threads", "cma", "staging", "tcp"));

  /** The operator's default (the vendor's contract); see the class comment. */
  public static final Backend OPERATOR_DEFAULT = HCCL;

  /** The Spark layer's default (runs on any cluster); see the class comment. */
  public static final Backend SPARK_DEFAULT = HOST;

  private enum Trait {
    NEEDS_DEVICE,
    SINGLE_NODE,
    TIMEOUT_AT_ROOT_INFO,
    RANK_TABLE_FILE,
    NUMBERED_DOMAIN
  }

  private static final List<String> NAMES = Arrays.stream(values()).map(Backend::wireName).toList();

  private final String wireName;
  private final List<String> transports;
  private final Set<Trait> traits;

  Backend(String wireName, List<String> transports, Trait... traits) {
    this.wireName = wireName;
    this.transports = transports;
    this.traits = traits.length == 0 ? EnumSet.noneOf(Trait.class) : EnumSet.of(traits[0], traits);
  }

  /** The backend named {@code name} exactly ({@code "hccl"}, ...), or empty (also for null). */
  public static Optional<Backend> forName(String name) {
    return Arrays.stream(values()).filter(b -> b.wireName.equals(name)).findFirst();
  }

  /**
   * The backend named {@code value}, the value of {@code parameter}.
   *
   * @throws IllegalArgumentException "{@code parameter = 'value'} is invalid; allowed: one of
   *     [hccl, lccl, host]"
   */
  public static Backend parse(String parameter, String value) {
    return forName(value)
        .orElseThrow(
            () ->
                new IllegalArgumentException(
                    parameter + " = '" + value + "' is invalid; allowed: " + allowed()));
  }

  /** Every backend's name, in declaration order: {@code [hccl, lccl, host]}. */
  public static List<String> names() {
    return NAMES;
  }

  /** What a backend parameter allows, for error texts: {@code one of [hccl, lccl, host]}. */
  public static String allowed() {
    return "one of " + NAMES;
  }

  /** The name options, the C ABI and {@link RootInfo} use: {@code "hccl"}, {@code "lccl"}, ... */
  public String wireName() {
    return wireName;
  }

  /**
   * Binds one NPU per rank ({@link CommunicatorOptions#deviceId()}; in Spark a task resource, or
   * the driver's addresses on a local master); the root info is made on the root's device.
   */
  public boolean needsDevice() {
    return traits.contains(Trait.NEEDS_DEVICE);
  }

  /** Runs on the NPUs of one node only: its ranks cannot span hosts. */
  public boolean singleNode() {
    return traits.contains(Trait.SINGLE_NODE);
  }

  /**
   * Takes the timeout when the root info is made: HCCL reads its timeouts once, at the process's
   * first HCCL call, which on the root rank is the one that makes the root info.
   */
  public boolean timeoutAtRootInfo() {
    return traits.contains(Trait.TIMEOUT_AT_ROOT_INFO);
  }

  /**
   * Can be set up from a rank table file instead of a root info ({@link
   * AllGatherParam#rankTableFile()}).
   */
  public boolean acceptsRankTableFile() {
    return traits.contains(Trait.RANK_TABLE_FILE);
  }

  /**
   * Its commDomain is the vendor's own domain, and a set commDomain lets the ranks join without a
   * root info: with {@link CommMode#COMM_MULTI_PROCESS} it reads {@code "ID"} or {@code
   * "ID:SIZE_MB"} (LCCL's bootstrap listens on port 10067 + ID of the host; SIZE_MB is its shared
   * buffer), with {@link CommMode#COMM_MULTI_THREAD} it is the uid every rank thread passes.
   */
  public boolean numberedDomain() {
    return traits.contains(Trait.NUMBERED_DOMAIN);
  }

  /**
   * The transports its communicators report ({@link Communicator#transport()}): for {@code host}
   * the one it picked, for a device backend its own name. For {@code host} also {@code executor}:
   * what a gather's ranks report when they all ran in one executor and gathered one output there,
   * without a communicator.
   */
  public List<String> transports() {
    return transports;
  }

  /** The wire name, so that texts read "backend hccl". */
  @Override
  public String toString() {
    return wireName;
  }
}
