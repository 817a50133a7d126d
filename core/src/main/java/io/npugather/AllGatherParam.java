package io.npugather;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

/**
 * The parameters of the all-gather operation, field for field those of the vendor's {@code
 * AllGatherParam}, with the same defaults. Immutable; build with {@link #builder()}.
 *
 * <p>{@link #validate()} checks every rule of the contract and names the field, the value and what
 * is allowed. It runs before any communication starts.
 */
public final class AllGatherParam {
  /** The names of the backends this library knows ({@link Backend#names()}). */
  public static final List<String> BACKENDS = Backend.names();

  /** Longest commDomain the vendor library accepts, in UTF-8 bytes. */
  public static final int MAX_COMM_DOMAIN_LENGTH = 128;

  /** Most ranks of one communicator (the native core's NPG_MAX_RANK_SIZE). */
  public static final int MAX_RANK_SIZE = 65536;

  /** What {@link #validate()} allows for rankSize without a communicator, in its words. */
  public static final String RANK_SIZE_ALLOWED = "1 <= rankSize <= " + MAX_RANK_SIZE;

  /**
   * Largest LCCL buffer, in MiB, for the "ID:SIZE_MB" commDomain form: LCAL sizes its buffer as
   * SIZE_MB MiB + 4 MiB in a 32-bit int, so 2044 and more overflow (the native lccl backend's
   * kLcalMaxBufferMb).
   */
  public static final int MAX_LCCL_BUFFER_MB = 2043;

  /** Smallest LCCL shared buffer, in MB, for the "ID:SIZE_MB" commDomain form. */
  public static final int MIN_LCCL_BUFFER_MB = 200;

  private static final Pattern LCCL_DOMAIN = Pattern.compile("(\\d{1,9})(?::(\\d{1,9}))?");

  private final int rank;
  private final int rankSize;
  private final int rankRoot;
  private final String backend;
  private final Communicator communicator;
  private final CommMode commMode;
  private final String rankTableFile;
  private final String commDomain;

  private AllGatherParam(Builder builder) {
    this.rank = builder.rank;
    this.rankSize = builder.rankSize;
    this.rankRoot = builder.rankRoot;
    this.backend = builder.backend;
    this.communicator = builder.communicator;
    this.commMode = builder.commMode;
    this.rankTableFile = builder.rankTableFile;
    this.commDomain = builder.commDomain;
  }

  public static Builder builder() {
    return new Builder();
  }

  /** A builder holding this param's values, to derive a variant. */
  public Builder toBuilder() {
    return new Builder()
        .rank(rank)
        .rankSize(rankSize)
        .rankRoot(rankRoot)
        .backend(backend)
        .communicator(communicator)
        .commMode(commMode)
        .rankTableFile(rankTableFile)
        .commDomain(commDomain);
  }

  /** This card's rank in the communicator; default 0. */
  public int rank() {
    return rank;
  }

  /** Number of ranks; default 0 (so it must be set unless a communicator is given). */
  public int rankSize() {
    return rankSize;
  }

  /** The rank that creates the root info the others join with; default 0. */
  public int rankRoot() {
    return rankRoot;
  }

  /** "hccl" (default, {@link Backend#OPERATOR_DEFAULT}), "lccl" or "host". */
  public String backend() {
    return backend;
  }

  /**
   * The backend {@link #backend()} names.
   *
   * @throws IllegalArgumentException as {@link #validate()} does when it names none
   */
  public Backend backendType() {
    return Backend.parse("AllGatherParam.backend", backend);
  }

  /**
   * The caller's communicator (the spec's {@code hcclComm}), or null when the library creates one.
   * The caller keeps ownership: the operation never closes it.
   */
  public Communicator communicator() {
    return communicator;
  }

  public CommMode commMode() {
    return commMode;
  }

  /** Path of a rank table JSON ({@link Backend#acceptsRankTableFile()}: hccl); "" when unused. */
  public String rankTableFile() {
    return rankTableFile;
  }

  /** Name of the communication domain; "" by default. */
  public String commDomain() {
    return commDomain;
  }

  /**
   * Checks every rule of the contract.
   *
   * @throws IllegalArgumentException naming the field, its value and what is allowed
   */
  public AllGatherParam validate() {
    Backend type = backendType();
    if (commMode == null) {
      throw invalid("commMode", "null", "COMM_MULTI_PROCESS or COMM_MULTI_THREAD");
    }
    if (communicator != null) {
      // The spec skips the rank checks for a caller's communicator; we check it agrees instead.
      if (rankSize != 0 && rankSize != communicator.rankSize()) {
        throw invalid(
            "rankSize", rankSize, "0 or the communicator's rank size " + communicator.rankSize());
      }
      if (rank != 0 && rank != communicator.rank()) {
        throw invalid("rank", rank, "0 or the communicator's rank " + communicator.rank());
      }
    } else {
      if (rankSize < 1 || rankSize > MAX_RANK_SIZE) {
        throw invalid("rankSize", rankSize, RANK_SIZE_ALLOWED);
      }
      if (rank < 0 || rank >= rankSize) {
        throw invalid("rank", rank, "0 <= rank < rankSize (" + rankSize + ")");
      }
      if (rankRoot < 0 || rankRoot >= rankSize) {
        throw invalid("rankRoot", rankRoot, "0 <= rankRoot < rankSize (" + rankSize + ")");
      }
    }
    if (commDomain == null) {
      throw invalid("commDomain", "null", "a string (\"\" for the default domain)");
    }
    int domainBytes = commDomain.getBytes(StandardCharsets.UTF_8).length;
    if (domainBytes > MAX_COMM_DOMAIN_LENGTH) {
      throw invalid(
          "commDomain",
          "of " + domainBytes + " UTF-8 bytes",
          "at most " + MAX_COMM_DOMAIN_LENGTH + " UTF-8 bytes");
    }
    requireNoNul("AllGatherParam.commDomain", commDomain);
    if (type.numberedDomain() && commMode == CommMode.COMM_MULTI_PROCESS && !commDomain.isEmpty()) {
      validateNumberedDomain(type);
    }
    if (rankTableFile == null) {
      throw invalid("rankTableFile", "null", "a path, or \"\" when unused");
    }
    if (!rankTableFile.isEmpty()) {
      if (!type.acceptsRankTableFile()) {
        throw invalid(
            "rankTableFile",
            "'" + rankTableFile + "'",
            "only with backend "
                + backendsWith(Backend::acceptsRankTableFile)
                + " (backend is '"
                + backend
                + "')");
      }
      if (!Files.isRegularFile(Path.of(rankTableFile))) {
        throw invalid("rankTableFile", "'" + rankTableFile + "'", "an existing file");
      }
    }
    return this;
  }

  private void validateNumberedDomain(Backend type) {
    Matcher m = LCCL_DOMAIN.matcher(commDomain);
    String allowed =
        "\"ID\" or \"ID:SIZE_MB\" with ID in [0, 65535] and SIZE_MB in ["
            + MIN_LCCL_BUFFER_MB
            + ", "
            + MAX_LCCL_BUFFER_MB
            + "] (LCCL's buffer in MiB: LCAL sizes it in a 32-bit int; all-gather uses a fixed"
            + " 204 MiB window of it) (backend "
            + type
            + ", COMM_MULTI_PROCESS)";
    if (!m.matches()) {
      throw invalid("commDomain", "'" + commDomain + "'", allowed);
    }
    if (Long.parseLong(m.group(1)) > 65535) {
      throw invalid("commDomain", "'" + commDomain + "' (ID " + m.group(1) + ")", allowed);
    }
    if (m.group(2) != null
        && (Long.parseLong(m.group(2)) < MIN_LCCL_BUFFER_MB
            || Long.parseLong(m.group(2)) > MAX_LCCL_BUFFER_MB)) {
      throw invalid("commDomain", "'" + commDomain + "' (SIZE_MB " + m.group(2) + ")", allowed);
    }
  }

  /** The backends with a property, as "'hccl'" or "'hccl' or 'lccl'". */
  private static String backendsWith(Predicate<Backend> property) {
    return Arrays.stream(Backend.values())
        .filter(property)
        .map(b -> "'" + b + "'")
        .collect(Collectors.joining(" or "));
  }

  /**
   * Refuses a commDomain with a NUL character as {@link #validate()} does, naming it {@code name}
   * (an option's key, say), so that a layer above can refuse it in the same words before any rank
   * starts.
   *
   * @throws IllegalArgumentException "NAME = with a NUL character at index I is invalid; allowed:
   *     no NUL characters (...)"
   */
  public static void requireNoNul(String name, String commDomain) {
    int at = commDomain.indexOf('\0');
    if (at >= 0) {
      throw invalidNamed(
          name,
          "with a NUL character at index " + at,
          "no NUL characters (the native library would cut the name there)");
    }
  }

  private static IllegalArgumentException invalid(String field, Object value, String allowed) {
    return invalidNamed("AllGatherParam." + field, value, allowed);
  }

  private static IllegalArgumentException invalidNamed(String name, Object value, String allowed) {
    return new IllegalArgumentException(name + " = " + value + " is invalid; allowed: " + allowed);
  }

  @Override
  public String toString() {
    return "AllGatherParam{rank="
        + rank
        + ", rankSize="
        + rankSize
        + ", rankRoot="
        + rankRoot
        + ", backend="
        + backend
        + ", communicator="
        + (communicator != null)
        + ", commMode="
        + commMode
        + ", rankTableFile='"
        + rankTableFile
        + "', commDomain='"
        + commDomain
        + "'}";
  }

  /** Builder with the spec's defaults. */
  public static final class Builder {
    private int rank = 0;
    private int rankSize = 0;
    private int rankRoot = 0;
    private String backend = Backend.OPERATOR_DEFAULT.wireName();
    private Communicator communicator;
    private CommMode commMode = CommMode.COMM_MULTI_PROCESS;
    private String rankTableFile = "";
    private String commDomain = "";

    private Builder() {}

    public Builder rank(int rank) {
      this.rank = rank;
      return this;
    }

    public Builder rankSize(int rankSize) {
      this.rankSize = rankSize;
      return this;
    }

    public Builder rankRoot(int rankRoot) {
      this.rankRoot = rankRoot;
      return this;
    }

    public Builder backend(String backend) {
      this.backend = backend;
      return this;
    }

    public Builder communicator(Communicator communicator) {
      this.communicator = communicator;
      return this;
    }

    public Builder commMode(CommMode commMode) {
      this.commMode = commMode;
      return this;
    }

    public Builder rankTableFile(String rankTableFile) {
      this.rankTableFile = rankTableFile;
      return this;
    }

    public Builder commDomain(String commDomain) {
      this.commDomain = commDomain;
      return this;
    }

    /** Builds without validating; {@link AllGatherParam#validate()} checks. */
    public AllGatherParam build() {
      return new AllGatherParam(this);
    }
  }
}
