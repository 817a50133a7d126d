package io.npugather.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.net.MalformedURLException;
import java.net.URL;
import java.net.URLClassLoader;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The thin connector jar without the operator API (npugather-core): its entry points fail with one
 * line naming the jars to add, before any class of the operator API is touched, instead of a
 * NoClassDefFoundError. The connector runs in a class loader of this test's classpath without the
 * core module's classes.
 */
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class CoreClasspathTest {
  private static final String MESSAGE =
      "NpuGather's operator API is not on the classpath (the core jar's io.npugather.NativeLibrary"
          + " is missing): add io.npugather:npugather-core, io.npugather:npugather-native and"
          + " org.bytedeco:javacpp next to the connector jar, or use the self-contained"
          + " npugather-spark_2.13-<version>-all.jar (or --packages"
          + " io.npugather:npugather-spark_2.13:<version>, which brings them all)";

  @Test
  void theOperatorApiOnTheClasspathPasses() {
    assertNull(CoreClasspath.missing());
    CoreClasspath.require();
  }

  @Test
  void aClassLoaderWithoutTheOperatorApiIsOneLineNamingTheJarsToAdd() throws Exception {
    try (URLClassLoader withoutCore = withoutCore()) {
      assertThrows(
          ClassNotFoundException.class,
          () -> Class.forName(CoreClasspath.CORE_CLASS, false, withoutCore));
      assertEquals(MESSAGE, CoreClasspath.missing(withoutCore));
      assertFalse(MESSAGE.contains("\n"));
    }
  }

  @Test
  void theFacadeRefusesBeforeTouchingTheOperatorApi() throws Throwable {
    try (URLClassLoader withoutCore = withoutCore()) {
      Class<?> facade = Class.forName(NpuGather.class.getName(), false, withoutCore);
      Class<?> dataset = Class.forName("org.apache.spark.sql.Dataset", false, withoutCore);
      Class<?> map = java.util.Map.class;
      for (MethodType type :
          List.of(
              MethodType.methodType(dataset, dataset),
              MethodType.methodType(dataset, dataset, map))) {
        // Looked up alone: reflection over all of the facade's methods would load DType.
        MethodHandle gather =
            MethodHandles.publicLookup().findStatic(facade, "allGatherOnNpu", type);
        Object[] arguments = new Object[type.parameterCount()];
        IllegalStateException e =
            assertThrows(IllegalStateException.class, () -> gather.invokeWithArguments(arguments));
        assertEquals(MESSAGE, e.getMessage());
      }
    }
  }

  @Test
  void theSqlExtensionAndThePluginStandAsideWithoutTheOperatorApi() throws Throwable {
    try (URLClassLoader withoutCore = withoutCore()) {
      Class<?> extensionsClass =
          Class.forName("org.apache.spark.sql.SparkSessionExtensions", true, withoutCore);
      Object extensions = extensionsClass.getConstructor().newInstance();
      Object connectorExtensions =
          Class.forName(NpuGatherExtensions.class.getName(), true, withoutCore)
              .getConstructor()
              .newInstance();
      connectorExtensions
          .getClass()
          .getMethod("apply", extensionsClass)
          .invoke(connectorExtensions, extensions);
      Object plugin =
          Class.forName(NpuGatherPlugin.class.getName(), true, withoutCore)
              .getConstructor()
              .newInstance();
      Object executorPlugin = plugin.getClass().getMethod("executorPlugin").invoke(plugin);
      Class<?> context =
          Class.forName("org.apache.spark.api.plugin.PluginContext", false, withoutCore);
      Class.forName("org.apache.spark.api.plugin.ExecutorPlugin", false, withoutCore)
          .getMethod("init", context, java.util.Map.class)
          .invoke(executorPlugin, null, java.util.Map.of());
      Class<?> warmUp = Class.forName(JvmWarmUp.class.getName(), false, withoutCore);
      // The warm-up, which loads the operator API, never started (its latch is still closed).
      MethodHandle done =
          MethodHandles.publicLookup()
              .findStatic(warmUp, "awaitDone", MethodType.methodType(boolean.class, long.class));
      assertFalse((boolean) done.invoke(0L));
    }
  }

  /** This test's classpath without the core module's classes, under the platform's loader. */
  private static URLClassLoader withoutCore() throws MalformedURLException {
    List<URL> urls = new ArrayList<>();
    for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
      String path = entry.replace(File.separatorChar, '/');
      if (!path.contains("/core/target/") && !path.contains("/npugather-core-")) {
        urls.add(new File(entry).toURI().toURL());
      }
    }
    assertTrue(
        urls.size() < System.getProperty("java.class.path").split(File.pathSeparator).length,
        "the core module is on the test's classpath: " + System.getProperty("java.class.path"));
    return new URLClassLoader(urls.toArray(new URL[0]), ClassLoader.getPlatformClassLoader());
  }
}
