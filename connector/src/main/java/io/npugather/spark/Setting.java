package io.npugather.spark;

import io.npugather.Backend;
import io.npugather.CommunicatorOptions.HostTransport;
import java.time.Duration;
import java.util.Locale;
import java.util.Objects;
import java.util.function.Function;
import org.apache.spark.network.util.JavaUtils;

/**
 * One setting, declared once: key, type, default, doc, what is allowed, check and scope. The
 * options of {@link AllGatherOptions} and every other {@code spark.npugather.*} setting are
 * declared this way ({@link NpuGatherConf#SETTINGS} lists them); the SQL conf entries, the docs'
 * tables and the Python keywords are made from these declarations.
 *
 * <p>Declared like Spark's {@code ConfigBuilder}: {@code Setting.option(KEY,
 * Setting.INTEGER).doc(...).allowed(...).check(...).createWithDefault(0)}.
 *
 * @param <T> the type of its value
 */
public final class Setting<T> {

  /** Where a setting is read. */
  public enum Scope {
    /**
     * An option of {@code allGatherOnNpu} and {@code onRanks}: given per call (key {@code
     * npugather.*}) or as the session's default (key {@code spark.npugather.*}).
     */
    OPTION,
    /** Read from the session's conf when an {@code allGatherOnNpu} is called or run. */
    SESSION,
    /**
     * Read from the application's Spark conf by every JVM (set at submit time or in
     * spark-defaults.conf; Spark refuses to change it in a running session).
     */
    APPLICATION
  }

  /** How a value is written in a conf or an options map, and read back. */
  public interface Type<T> {
    /**
     * The value {@code text} of {@code key} (as the caller wrote the key).
     *
     * @throws IllegalArgumentException naming the key, the text and what the type allows
     */
    T parse(String key, String text);

    /** {@code value} as a conf writes it: {@code parse(key, text(v))} is {@code v}. */
    String text(T value);

    /** The type's name outside Java (the Python keywords): string, integer, boolean, duration. */
    String kind();
  }

  /**
   * A check of a value of {@code key}; {@code written} is the value's text as the caller wrote it
   * in a conf or map, null when the value came from a Java call.
   */
  @FunctionalInterface
  public interface Check<T> {
    /**
     * @throws IllegalArgumentException naming the key, the value and what is allowed
     */
    void check(String key, T value, String written);
  }

  /** A Java {@code int}, as {@link Integer#parseInt} reads it around blanks. */
  public static final Type<Integer> INTEGER =
      type(
          "integer",
          (key, text) -> {
            try {
              return Integer.parseInt(text.trim());
            } catch (NumberFormatException e) {
              throw invalid(key, "'" + text + "'", "an integer");
            }
          },
          String::valueOf);

  /** {@code true} or {@code false}, in any case, around blanks. */
  public static final Type<Boolean> BOOLEAN =
      type(
          "boolean",
          (key, text) ->
              switch (text.trim().toLowerCase(Locale.ROOT)) {
                case "true" -> true;
                case "false" -> false;
                default -> throw invalid(key, "'" + text + "'", "true or false");
              },
          String::valueOf);

  /** Text as written. */
  public static final Type<String> STRING = type("string", (key, text) -> text, text -> text);

  /** A duration as Spark's time strings write it (120s, 5m, 500ms; ms without a unit). */
  public static final Type<Duration> DURATION =
      type(
          "duration",
          (key, text) -> {
            try {
              return Duration.ofMillis(JavaUtils.timeStringAsMs(text.trim()));
            } catch (NumberFormatException e) {
              throw invalid(key, "'" + text + "'", "a duration such as 120s, 5m or 500ms");
            }
          },
          SettingValues::durationText);

  /** A backend by its name ({@link Backend#wireName()}), in any case, around blanks. */
  public static final Type<Backend> BACKEND =
      type(
          "string",
          (key, text) -> {
            String name = text.trim().toLowerCase(Locale.ROOT);
            return Backend.forName(name).orElseThrow(() -> invalid(key, name, Backend.allowed()));
          },
          Backend::wireName);

  /** A host transport by its name, in any case, around blanks. */
  public static final Type<HostTransport> HOST_TRANSPORT =
      type(
          "string",
          (key, text) -> {
            try {
              return HostTransport.valueOf(text.trim().toUpperCase(Locale.ROOT));
            } catch (IllegalArgumentException e) {
              throw invalid(key, "'" + text + "'", "auto, tcp or staging");
            }
          },
          transport -> transport.name().toLowerCase(Locale.ROOT));

  private final String key;
  private final Scope scope;
  private final Type<T> type;
  private final T defaultValue;
  private final String defaultText;
  private final String doc;
  private final String allowed;
  private final Check<T> check;
  private final Function<T, String> shown;

  private Setting(Builder<T> builder, T defaultValue, String defaultText) {
    this.key = builder.key;
    this.scope = builder.scope;
    this.type = builder.type;
    this.defaultValue = defaultValue;
    this.defaultText = defaultText;
    this.doc = Objects.requireNonNull(builder.doc, "doc of " + builder.key);
    this.allowed = builder.allowed;
    this.check = builder.check;
    this.shown = builder.shown != null ? builder.shown : type::text;
  }

  /** An option of {@code allGatherOnNpu}; {@code key} is {@code npugather.*}. */
  public static <T> Builder<T> option(String key, Type<T> type) {
    return new Builder<>(key, Scope.OPTION, type);
  }

  /** A session setting; {@code key} is {@code spark.npugather.*}. */
  public static <T> Builder<T> session(String key, Type<T> type) {
    return new Builder<>(key, Scope.SESSION, type);
  }

  /** An application-wide setting; {@code key} is {@code spark.npugather.*}. */
  public static <T> Builder<T> application(String key, Type<T> type) {
    return new Builder<>(key, Scope.APPLICATION, type);
  }

  /** The key: {@code npugather.*} for an option, else {@code spark.npugather.*}. */
  public String key() {
    return key;
  }

  /** The key of the Spark conf entry: an option's key with the {@code spark.} prefix. */
  public String confKey() {
    return scope == Scope.OPTION ? AllGatherOptions.CONF_PREFIX + key : key;
  }

  public Scope scope() {
    return scope;
  }

  public Type<T> type() {
    return type;
  }

  /** The default, or null when it is derived (the doc says how). */
  public T defaultValue() {
    return defaultValue;
  }

  /** The default as a conf writes it, or null when it is derived. */
  public String defaultText() {
    return defaultText;
  }

  /** What the setting means, in a sentence or a few (Markdown code spans). */
  public String doc() {
    return doc;
  }

  /** The doc of the Spark conf entry ({@code SET -v}). */
  public String confDoc() {
    return scope == Scope.OPTION
        ? "Default of the option " + key + " of allGatherOnNpu and onRanks: " + doc
        : doc;
  }

  /** What a value may be, in the words of its errors, or null when only the check says. */
  public String allowed() {
    return allowed;
  }

  /**
   * The value {@code text} of this setting, parsed and checked.
   *
   * @param writtenKey the key as the caller wrote it, which errors name
   * @throws IllegalArgumentException naming {@code writtenKey}, the value and what is allowed
   */
  public T read(String writtenKey, String text) {
    Objects.requireNonNull(text, writtenKey);
    T value = type.parse(writtenKey, text);
    check.check(writtenKey, value, text);
    return value;
  }

  /**
   * {@code value} once checked.
   *
   * @throws IllegalArgumentException naming the key, the value and what is allowed
   */
  T checked(T value) {
    check.check(key, value, null);
    return value;
  }

  /** {@code value} as a plan or a {@code toString} shows it. */
  String shown(T value) {
    return shown.apply(value);
  }

  @Override
  public String toString() {
    return key;
  }

  /** The error of a value that is not allowed, in the words every check uses. */
  public static IllegalArgumentException invalid(String key, Object value, String allowed) {
    return new IllegalArgumentException(key + " = " + value + " is invalid; allowed: " + allowed);
  }

  private static <T> Type<T> type(
      String kind,
      java.util.function.BiFunction<String, String, T> parse,
      Function<T, String> text) {
    return new Type<>() {
      @Override
      public T parse(String key, String value) {
        return parse.apply(key, value);
      }

      @Override
      public String text(T value) {
        return text.apply(value);
      }

      @Override
      public String kind() {
        return kind;
      }
    };
  }

  /** A setting being declared. */
  public static final class Builder<T> {
    private final String key;
    private final Scope scope;
    private final Type<T> type;
    private String doc;
    private String allowed;
    private Check<T> check = (key, value, written) -> {};
    private Function<T, String> shown;

    private Builder(String key, Scope scope, Type<T> type) {
      this.key = Objects.requireNonNull(key, "key");
      this.scope = scope;
      this.type = Objects.requireNonNull(type, "type");
    }

    public Builder<T> doc(String doc) {
      this.doc = doc;
      return this;
    }

    /** What a value may be, in the words of the check's error. */
    public Builder<T> allowed(String allowed) {
      this.allowed = allowed;
      return this;
    }

    public Builder<T> check(Check<T> check) {
      this.check = Objects.requireNonNull(check, "check");
      return this;
    }

    /** How plans and {@code toString} show a value (default: as a conf writes it). */
    public Builder<T> shownAs(Function<T, String> shown) {
      this.shown = shown;
      return this;
    }

    public Setting<T> createWithDefault(T defaultValue) {
      Objects.requireNonNull(defaultValue, "default of " + key);
      return new Setting<>(this, defaultValue, type.text(defaultValue));
    }

    /** A default written as users write the value ({@code 120s} rather than {@code 2m}). */
    public Setting<T> createWithDefaultString(String defaultText) {
      return new Setting<>(this, type.parse(key, defaultText), defaultText);
    }

    /** A setting whose default is derived where it is read (the doc says how). */
    public Setting<T> createOptional() {
      return new Setting<>(this, null, null);
    }
  }
}
