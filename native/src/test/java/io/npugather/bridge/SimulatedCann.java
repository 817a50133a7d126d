package io.npugather.bridge;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.bytedeco.javacpp.Loader;

/**
 * The simulated CANN runtime of {@code src/test/cpp/fake_cann}, built for the tests of the device
 * backends: test-only libascendcl.so / libhccl.so / libhcomm.so / liblcal.so that export the ACL,
 * HCCL and LCAL symbols on host memory and really all-gather between ranks. It proves the binding
 * (loading, staging, error mapping, fault handling), never anything about NPU hardware.
 *
 * <p>The library directory is chosen by environment, which a running JVM cannot change, so every
 * check runs in a child process: a C++ test program (linked with the core archive) or a child JVM
 * that goes through the JNI library.
 */
final class SimulatedCann {
  static final Path MODULE = Path.of(System.getProperty("user.dir"));
  static final Path OUT = MODULE.resolve("target/fake-cann");
  private static final Path CORE_ARCHIVE = MODULE.resolve("target/native/libnpugather_core.a");
  private static final Path SOURCES = MODULE.resolve("src/test/cpp/fake_cann");
  private static boolean built;

  private SimulatedCann() {}

  /**
   * Library variants, built by {@code build-fake-cann.sh} (which the other modules' tests use too):
   * lib64 (complete: ACL, HCCL, LCAL), lib64-minimal (no optional symbols), lib64-split (HCCL's
   * communicator management in libhcomm.so); the incomplete installs lib64-acl-only and
   * lib64-no-hcomm; plus the C++ test programs.
   */
  static synchronized void build() throws Exception {
    if (built) {
      return;
    }
    assertTrue(Files.isRegularFile(CORE_ARCHIVE), "missing " + CORE_ARCHIVE);
    Files.createDirectories(OUT.resolve("empty"));
    List<List<String>> commands = new ArrayList<>();
    commands.add(
        List.of(
            "bash",
            SOURCES.resolve("build-fake-cann.sh").toString(),
            OUT.toString(),
            "--all-variants"));
    for (String program :
        List.of("hccl_over_simulated_cann_test", "lccl_over_simulated_cann_test")) {
      commands.add(
          List.of(
              "g++",
              "-std=c++17",
              "-O0",
              "-pthread",
              "-Wall",
              "-Wextra",
              "-Werror",
              "-Isrc/main/cpp/include",
              SOURCES.resolve(program + ".cc").toString(),
              CORE_ARCHIVE.toString(),
              "-o",
              OUT.resolve(program).toString()));
    }
    runAll(commands);
    copy("lib64/libascendcl.so", "lib64-acl-only/libascendcl.so");
    copy("lib64-split/libascendcl.so", "lib64-no-hcomm/libascendcl.so");
    copy("lib64-split/libhccl.so", "lib64-no-hcomm/libhccl.so");
    built = true;
  }

  private static void copy(String from, String to) throws Exception {
    Files.createDirectories(OUT.resolve(to).getParent());
    Files.copy(OUT.resolve(from), OUT.resolve(to), StandardCopyOption.REPLACE_EXISTING);
  }

  private static void runAll(List<List<String>> commands) throws Exception {
    List<Process> processes = new ArrayList<>();
    for (List<String> command : commands) {
      processes.add(
          new ProcessBuilder(command).directory(MODULE.toFile()).redirectErrorStream(true).start());
    }
    for (int i = 0; i < processes.size(); i++) {
      Process p = processes.get(i);
      String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      assertTrue(p.waitFor(300, TimeUnit.SECONDS), "timed out: " + commands.get(i));
      assertEquals(0, p.exitValue(), "failed: " + commands.get(i) + "\n" + output);
    }
  }

  /**
   * Runs command with no CANN in sight except libDir; asserts it ends with "N passed, 0 failed" (N
   * > 0) and returns its output.
   */
  static String run(List<String> command, Path libDir, boolean clearLoaderPath) throws Exception {
    return run(command, libDir, clearLoaderPath, Map.of());
  }

  /** {@link #run(List, Path, boolean)} with {@code extraEnv} set for the program. */
  static String run(
      List<String> command, Path libDir, boolean clearLoaderPath, Map<String, String> extraEnv)
      throws Exception {
    Map<String, String> env = new HashMap<>(extraEnv);
    env.put("NPUGATHER_CANN_LIB_DIR", libDir.toString());
    String output = runWithoutCann(command, env, clearLoaderPath, 120);
    String[] lines = output.strip().split("\n");
    String last = lines[lines.length - 1].strip();
    assertTrue(last.matches("[1-9]\\d* passed, 0 failed"), "last line: " + last);
    return output;
  }

  /**
   * Runs {@code command} in the module's folder with none of CANN's, HCCL's, LCAL's, ATB's or this
   * project's environment variables but {@code env}; asserts it exits 0 within {@code
   * timeoutSeconds} and returns its output.
   */
  static String runWithoutCann(
      List<String> command, Map<String, String> env, boolean clearLoaderPath, long timeoutSeconds)
      throws Exception {
    Path log = Files.createTempFile("npugather-simulated-cann", ".log");
    try {
      ProcessBuilder builder =
          new ProcessBuilder(command)
              .directory(MODULE.toFile())
              .redirectErrorStream(true)
              .redirectOutput(log.toFile());
      Map<String, String> environment = builder.environment();
      environment
          .keySet()
          .removeIf(
              k ->
                  k.startsWith("ASCEND_")
                      || k.startsWith("HCCL_")
                      || k.startsWith("NPUGATHER_")
                      || k.startsWith("ATB_")
                      || k.startsWith("LCAL_"));
      if (clearLoaderPath) {
        environment.remove("LD_LIBRARY_PATH");
      }
      environment.putAll(env);
      Process process = builder.start();
      boolean finished = process.waitFor(timeoutSeconds, TimeUnit.SECONDS);
      if (!finished) {
        process.destroyForcibly().waitFor();
      }
      String output = Files.readString(log, StandardCharsets.UTF_8);
      System.out.println(output);
      assertTrue(finished, "timed out: " + command);
      assertEquals(0, process.exitValue(), "exit code of " + command + "\n" + output);
      return output;
    } finally {
      Files.deleteIfExists(log);
    }
  }

  /** Runs suite of the C++ test program over libDir. */
  static String runSuite(String program, String suite, Path libDir, boolean clearLoaderPath)
      throws Exception {
    return run(List.of(OUT.resolve(program).toString(), suite), libDir, clearLoaderPath);
  }

  /** Runs {@link SimulatedCannJniMain} for backend in a child JVM over the complete libraries. */
  static String runJni(String backend) throws Exception {
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    // The JNI library sits in target/classes; JavaCPP's jar is wherever Maven resolved it.
    String javacpp =
        Path.of(Loader.class.getProtectionDomain().getCodeSource().getLocation().toURI())
            .toString();
    String classPath =
        String.join(
            File.pathSeparator,
            MODULE.resolve("target/classes").toString(),
            MODULE.resolve("target/test-classes").toString(),
            javacpp);
    return run(
        List.of(java, "-cp", classPath, SimulatedCannJniMain.class.getName(), backend),
        OUT.resolve("lib64"),
        false);
  }
}
