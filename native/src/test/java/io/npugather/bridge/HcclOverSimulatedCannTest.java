package io.npugather.bridge;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.bytedeco.javacpp.Loader;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Runs the hccl backend over the simulated CANN runtime of {@code src/test/cpp/fake_cann}:
 * test-only libascendcl.so / libhccl.so (/ libhcomm.so) that export the ACL and HCCL symbols
 * on host memory and really all-gather between ranks. This proves the binding (loading,
 * staging, error mapping, fault handling), never anything about NPU hardware.
 *
 * <p>The library directory is chosen by environment, which a running JVM cannot change, so every
 * check runs in a child process: the C++ test program (linked with the core archive) and a child
 * JVM that goes through the JNI library.
 */
class HcclOverSimulatedCannTest {
  private static final Path MODULE = Path.of(System.getProperty("user.dir"));
  private static final Path CORE_ARCHIVE = MODULE.resolve("target/native/libnpugather_core.a");
  private static final Path SOURCES = MODULE.resolve("src/test/cpp/fake_cann");
  private static final Path OUT = MODULE.resolve("target/fake-cann");
  private static final Path PROGRAM = OUT.resolve("hccl_over_simulated_cann_test");

  /**
   * Library variants (src/test/cpp/fake_cann/build-fake-cann.sh): a complete CANN, one without
   * optional symbols, one with libhcomm.so; and the C++ test program.
   */
  @BeforeAll
  static void buildSimulatedCann() throws Exception {
    assertTrue(Files.isRegularFile(CORE_ARCHIVE), "missing " + CORE_ARCHIVE);
    Files.createDirectories(OUT.resolve("empty"));
    runAll(List.of(
        List.of("bash", SOURCES.resolve("build-fake-cann.sh").toString(), OUT.toString(),
            "--all-variants"),
        List.of("g++", "-std=c++17", "-O1", "-pthread", "-Wall", "-Wextra", "-Werror",
            "-Isrc/main/cpp/include", SOURCES.resolve("hccl_over_simulated_cann_test.cc").toString(),
            CORE_ARCHIVE.toString(), "-o", PROGRAM.toString())));
    // Incomplete installations: ACL without HCCL, and a split HCCL without its libhcomm.so.
    copy("lib64/libascendcl.so", "lib64-acl-only/libascendcl.so");
    copy("lib64-split/libascendcl.so", "lib64-no-hcomm/libascendcl.so");
    copy("lib64-split/libhccl.so", "lib64-no-hcomm/libhccl.so");
  }

  private static void copy(String from, String to) throws Exception {
    Files.createDirectories(OUT.resolve(to).getParent());
    Files.copy(OUT.resolve(from), OUT.resolve(to), StandardCopyOption.REPLACE_EXISTING);
  }

  private static void runAll(List<List<String>> commands) throws Exception {
    List<Process> processes = new ArrayList<>();
    for (List<String> command : commands) {
      processes.add(new ProcessBuilder(command).directory(MODULE.toFile()).redirectErrorStream(true).start());
    }
    for (int i = 0; i < processes.size(); i++) {
      Process p = processes.get(i);
      String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      assertTrue(p.waitFor(300, TimeUnit.SECONDS), "timed out: " + commands.get(i));
      assertEquals(0, p.exitValue(), "failed: " + commands.get(i) + "\n" + output);
    }
  }

  /** Runs command with no CANN in sight except libDir; returns its output. */
  private static String runWithSimulatedCann(List<String> command, Path libDir, boolean clearLoaderPath)
      throws Exception {
    Path log = Files.createTempFile("npugather-simulated-cann", ".log");
    try {
      ProcessBuilder builder = new ProcessBuilder(command).directory(MODULE.toFile())
          .redirectErrorStream(true).redirectOutput(log.toFile());
      Map<String, String> env = builder.environment();
      env.keySet().removeIf(k -> k.startsWith("ASCEND_") || k.startsWith("HCCL_")
          || k.startsWith("NPUGATHER_"));
      if (clearLoaderPath) {
        env.remove("LD_LIBRARY_PATH");
      }
      env.put("NPUGATHER_CANN_LIB_DIR", libDir.toString());
      Process process = builder.start();
      boolean finished = process.waitFor(120, TimeUnit.SECONDS);
      if (!finished) {
        process.destroyForcibly().waitFor();
      }
      String output = Files.readString(log, StandardCharsets.UTF_8);
      System.out.println(output);
      assertTrue(finished, "timed out: " + command);
      assertEquals(0, process.exitValue(), "exit code of " + command + "\n" + output);
      String[] lines = output.strip().split("\n");
      String last = lines[lines.length - 1].strip();
      assertTrue(last.matches("[1-9]\\d* passed, 0 failed"), "last line: " + last);
      return output;
    } finally {
      Files.deleteIfExists(log);
    }
  }

  private static String runSuite(String suite, Path libDir, boolean clearLoaderPath) throws Exception {
    return runWithSimulatedCann(List.of(PROGRAM.toString(), suite), libDir, clearLoaderPath);
  }

  @Test
  void completeLibraryOverSimulatedCannGathersAndReportsEveryFault() throws Exception {
    runSuite("full", OUT.resolve("lib64"), false);
  }

  @Test
  void libraryWithoutOptionalSymbolsOverSimulatedCannPadsRaggedBlocks() throws Exception {
    runSuite("minimal", OUT.resolve("lib64-minimal"), false);
  }

  @Test
  void communicatorManagementInLibhcommOverSimulatedCannIsFound() throws Exception {
    runSuite("split", OUT.resolve("lib64-split"), false);
  }

  @Test
  void missingCannLibrariesGiveAnActionableMessage() throws Exception {
    String output = runSuite("missing", OUT.resolve("empty"), true);
    assertTrue(output.contains("set_env.sh"), output);
  }

  @Test
  void incompleteCannInstallationsNameTheMissingFileOrSymbol() throws Exception {
    runSuite("no-hccl", OUT.resolve("lib64-acl-only"), true);
    runSuite("no-hcomm", OUT.resolve("lib64-no-hcomm"), true);
  }

  @Test
  void jniPathGathersOverSimulatedCann() throws Exception {
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    // The JNI library sits in target/classes; JavaCPP's jar is wherever Maven resolved it.
    String javacpp = Path.of(Loader.class.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
    String classPath = String.join(File.pathSeparator, MODULE.resolve("target/classes").toString(),
        MODULE.resolve("target/test-classes").toString(), javacpp);
    runWithSimulatedCann(List.of(java, "-cp", classPath, HcclOverSimulatedCannJniMain.class.getName()),
        OUT.resolve("lib64"), false);
  }
}
