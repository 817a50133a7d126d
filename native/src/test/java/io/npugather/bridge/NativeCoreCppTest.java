package io.npugather.bridge;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Builds and runs the C++ core's own test programs (native/src/test/cpp, all on the harness of
 * support/test_harness.h) against the core archive the build produced, and the tests of the bin/
 * commands. Each program ends with "N passed, N failed".
 */
class NativeCoreCppTest {
  private static final Path MODULE = Path.of(System.getProperty("user.dir"));
  private static final Path CORE_ARCHIVE = MODULE.resolve("target/native/libnpugather_core.a");

  static String run(List<String> command, long timeoutSeconds) throws Exception {
    Path log = Files.createTempFile("npugather-native-test", ".log");
    try {
      Process process =
          new ProcessBuilder(command)
              .directory(MODULE.toFile())
              .redirectErrorStream(true)
              .redirectOutput(log.toFile())
              .start();
      boolean finished = process.waitFor(timeoutSeconds, TimeUnit.SECONDS);
      if (!finished) {
        process.destroyForcibly().waitFor();
      }
      String output = Files.readString(log, StandardCharsets.UTF_8);
      System.out.println(output);
      assertTrue(finished, "timed out after " + timeoutSeconds + " s: " + command);
      assertEquals(0, process.exitValue(), "exit code of " + command + "\n" + output);
      return output;
    } finally {
      Files.deleteIfExists(log);
    }
  }

  static void assertAllPassed(String output) {
    String[] lines = output.strip().split("\n");
    String last = lines[lines.length - 1].strip();
    assertTrue(last.matches("\\d+ passed, 0 failed"), "last line: " + last);
    assertTrue(!last.startsWith("0 passed"), "no test ran: " + last);
  }

  private static List<Path> testSources() throws IOException {
    try (Stream<Path> files = Files.list(MODULE.resolve("src/test/cpp"))) {
      return files.filter(p -> p.toString().endsWith(".cc")).sorted().toList();
    }
  }

  /**
   * Runs the commands side by side, as many at once as there are CPUs (compilations: the programs
   * then run one at a time); fails with the first that failed or overran timeoutSeconds.
   */
  static void runSideBySide(List<List<String>> commands, long timeoutSeconds) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(Runtime.getRuntime().availableProcessors());
    try {
      List<Future<String>> runs = new ArrayList<>();
      for (List<String> command : commands) {
        runs.add(pool.submit(() -> run(command, timeoutSeconds)));
      }
      for (Future<String> done : runs) {
        try {
          done.get();
        } catch (ExecutionException e) {
          if (e.getCause() instanceof Error error) {
            throw error;
          }
          throw e;
        }
      }
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void cppCoreTestsPass() throws Exception {
    assertTrue(Files.isRegularFile(CORE_ARCHIVE), "missing " + CORE_ARCHIVE);
    List<List<String>> compilations = new ArrayList<>();
    List<Path> binaries = new ArrayList<>();
    for (Path source : testSources()) {
      String name = source.getFileName().toString().replace(".cc", "");
      Path binary = MODULE.resolve("target/native/" + name);
      binaries.add(binary);
      compilations.add(
          List.of(
              "g++",
              "-std=c++17",
              "-O2",
              "-pthread",
              "-Wall",
              "-Wextra",
              "-Werror",
              "-Isrc/main/cpp/include",
              "-Isrc/main/cpp",
              source.toString(),
              CORE_ARCHIVE.toString(),
              "-o",
              binary.toString()));
    }
    runSideBySide(compilations, 300);
    for (Path binary : binaries) {
      assertAllPassed(run(List.of(binary.toString()), 300));
    }
  }

  /** The tests of the bin/ commands (cleanup, NPU discovery), one shell script each. */
  @Test
  void commandTestsPass() throws Exception {
    List<Path> scripts;
    try (Stream<Path> files = Files.list(MODULE.resolve("src/test/sh"))) {
      scripts = files.filter(p -> p.toString().endsWith(".sh")).sorted().toList();
    }
    assertTrue(scripts.size() >= 2, "missing command tests: " + scripts);
    for (Path script : scripts) {
      assertAllPassed(run(List.of("bash", script.toString()), 120));
    }
  }
}
