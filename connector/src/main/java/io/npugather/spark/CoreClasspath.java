package io.npugather.spark;

/**
 * The operator API's presence beside the connector, with one line naming what to add when it is
 * missing: the thin connector jar builds on {@value #CORE_ARTIFACT}, which in turn needs the native
 * jar and JavaCPP ({@code io.npugather.NativeLibrary} names those when they are missing); the
 * self-contained {@code -all} jar carries all three.
 *
 * <p>Every entry point of the connector (the facade {@link NpuGather}, the SQL extension, the
 * plugin, the Connect relation plugin, and the Python package before it reaches the facade) calls
 * this before it touches a class of the operator API. So this class names none: it must load, and
 * speak, when those classes are absent.
 */
public final class CoreClasspath {
  /** The Maven coordinate (without version) of the operator API the connector builds on. */
  public static final String CORE_ARTIFACT = "io.npugather:npugather-core";

  /** A class of the operator API, looked up by name only. */
  static final String CORE_CLASS = "io.npugather.NativeLibrary";

  private CoreClasspath() {}

  /**
   * Checks that the operator API is on the connector's classpath.
   *
   * @throws IllegalStateException naming the jars to add
   */
  public static void require() {
    String missing = missing();
    if (missing != null) {
      throw new IllegalStateException(missing);
    }
  }

  /**
   * The one line naming the jars to add when the operator API is not on the connector's classpath,
   * else null: for callers that report it their own way (a warning, Python's error).
   */
  public static String missing() {
    return missing(CoreClasspath.class.getClassLoader());
  }

  /** The one line naming the jars to add when {@code loader} lacks the operator API, else null. */
  static String missing(ClassLoader loader) {
    try {
      Class.forName(CORE_CLASS, false, loader);
      return null;
    } catch (ClassNotFoundException | LinkageError e) {
      return "NpuGather's operator API is not on the classpath (the core jar's "
          + CORE_CLASS
          + " is missing): add "
          + CORE_ARTIFACT
          + ", io.npugather:npugather-native and org.bytedeco:javacpp next to the connector jar,"
          + " or use the self-contained npugather-spark_2.13-<version>-all.jar (or --packages"
          + " io.npugather:npugather-spark_2.13:<version>, which brings them all)";
    }
  }
}
