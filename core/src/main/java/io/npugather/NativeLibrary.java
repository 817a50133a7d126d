package io.npugather;

import io.npugather.bridge.NativeCore;
import java.util.List;
import java.util.Locale;

/**
 * The native core's presence and loading, with one line naming what to add when it is missing: the
 * thin connector jar needs the native jar ({@value #NATIVE_ARTIFACT}, which carries the JNI
 * library) and JavaCPP ({@value #JAVACPP_ARTIFACT}) beside it; the self-contained {@code -all} jar
 * carries both.
 */
public final class NativeLibrary {
  /** The Maven coordinate (without version) of the jar with the binding and the JNI library. */
  public static final String NATIVE_ARTIFACT = "io.npugather:npugather-native";

  /** The Maven coordinate (without version) of JavaCPP, which the binding runs on. */
  public static final String JAVACPP_ARTIFACT = "org.bytedeco:javacpp";

  static final String BINDING_CLASS = "io.npugather.bridge.NativeCore";
  static final String JAVACPP_CLASS = "org.bytedeco.javacpp.Loader";

  private static final String SELF_CONTAINED =
      " next to the connector jar, or use the self-contained npugather-spark_2.13-<version>-all.jar"
          + " (or --packages io.npugather:npugather-spark_2.13:<version>, which brings both)";

  private NativeLibrary() {}

  /**
   * Checks that the binding's classes are on the classpath of {@code loader}, without loading the
   * library: a driver need not run on its executors' platform.
   *
   * @throws IllegalStateException naming the jar to add
   */
  public static void requireClasses(ClassLoader loader) {
    for (String name : List.of(BINDING_CLASS, JAVACPP_CLASS)) {
      try {
        Class.forName(name, false, loader);
      } catch (ClassNotFoundException | LinkageError e) {
        throw missingClass(name);
      }
    }
  }

  /**
   * Loads the native library, once per JVM.
   *
   * @throws IllegalStateException naming the jar to add, or why the library does not load here
   */
  public static void load() {
    try {
      NativeCore.load();
    } catch (NoClassDefFoundError e) {
      String message = String.valueOf(e.getMessage());
      // "Could not initialize class": an earlier attempt found the class but not the library.
      throw message.startsWith("Could not initialize class")
          ? notLoadable(e)
          : missingClass(message.replace('/', '.'));
    } catch (UnsatisfiedLinkError | ExceptionInInitializerError e) {
      throw notLoadable(e);
    }
  }

  /** The error for a class of the binding ({@code io.npugather.bridge}) or JavaCPP not found. */
  static IllegalStateException missingClass(String className) {
    boolean javacpp = className.contains("org.bytedeco");
    return new IllegalStateException(
        "NpuGather's native library is not on the classpath ("
            + (javacpp ? "JavaCPP's " : "the native jar's ")
            + className
            + " is missing): add "
            + (javacpp ? JAVACPP_ARTIFACT : NATIVE_ARTIFACT + " and " + JAVACPP_ARTIFACT)
            + SELF_CONTAINED);
  }

  /** The error for a library that is there but does not load on this host. */
  static IllegalStateException notLoadable(Throwable e) {
    String reason =
        String.valueOf(e.getCause() != null ? e.getCause() : e).lines().findFirst().orElse("");
    return new IllegalStateException(
        "NpuGather's native library does not load on this host ("
            + System.getProperty("os.name").toLowerCase(Locale.ROOT)
            + "-"
            + System.getProperty("os.arch")
            + "; the jars carry linux-x86_64 and linux-arm64): "
            + reason,
        e);
  }
}
