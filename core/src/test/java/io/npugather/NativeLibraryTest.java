package io.npugather;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URL;
import java.net.URLClassLoader;
import org.junit.jupiter.api.Test;

/** A connector without its native jar says, in one line, which jars to add. */
class NativeLibraryTest {

  @Test
  void theThinJarAloneIsOneLineNamingTheNativeJarAndJavaCpp() throws Exception {
    // A class loader that sees neither the binding nor JavaCPP, as with only the thin jar.
    try (URLClassLoader thin =
        new URLClassLoader(new URL[0], ClassLoader.getPlatformClassLoader())) {
      IllegalStateException e =
          assertThrows(IllegalStateException.class, () -> NativeLibrary.requireClasses(thin));
      assertEquals(
          "NpuGather's native library is not on the classpath (the native jar's"
              + " io.npugather.bridge.NativeCore is missing): add io.npugather:npugather-native and"
              + " org.bytedeco:javacpp next to the connector jar, or use the self-contained"
              + " npugather-spark_2.13-<version>-all.jar (or --packages"
              + " io.npugather:npugather-spark_2.13:<version>, which brings both)",
          e.getMessage());
    }
  }

  @Test
  void aMissingJavaCppNamesJavaCpp() {
    String message = NativeLibrary.missingClass("org.bytedeco.javacpp.Loader").getMessage();
    assertTrue(
        message.contains(
            "(JavaCPP's org.bytedeco.javacpp.Loader is missing): add"
                + " org.bytedeco:javacpp next to the connector jar"),
        message);
    assertEquals(1, message.lines().count());
  }

  @Test
  void aLibraryThatDoesNotLoadIsOneLineNamingThePlatformAndTheReason() {
    UnsatisfiedLinkError failure =
        new UnsatisfiedLinkError("no jniNativeCore in java.library.path: /usr/lib\nmore detail");
    String message = NativeLibrary.notLoadable(failure).getMessage();
    assertTrue(
        message.startsWith("NpuGather's native library does not load on this host (linux-"),
        message);
    assertTrue(
        message.endsWith(
            "java.lang.UnsatisfiedLinkError: no jniNativeCore in java.library.path:" + " /usr/lib"),
        message);
    assertEquals(1, message.lines().count());
  }

  @Test
  void withTheNativeJarTheClassesAreFoundAndTheLibraryLoads() {
    NativeLibrary.requireClasses(NativeLibrary.class.getClassLoader());
    NativeLibrary.load();
  }
}
