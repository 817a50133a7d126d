package io.npugather.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code bin/npugather-example} as a user runs it: a bad option or too many ranks is one line on
 * the terminal, exit code 2, no stack trace and no terminal control codes. The script reuses the
 * build's classes and the recorded classpath ({@code examples/target/classpath.txt}, written here
 * from the test classpath when a previous run of the script has not left one, or left one older
 * than a pom.xml), so it does not start a Maven build of its own.
 */
class ExampleCommandTest {
  private static final Path MODULE = Path.of(System.getProperty("user.dir"));
  private static final Path SCRIPT = MODULE.getParent().resolve("bin/npugather-example");

  private static String run(String... args) throws Exception {
    Path classpath = MODULE.resolve("target/classpath.txt");
    if (!Files.isRegularFile(classpath) || olderThanAPom(classpath)) {
      String cp =
          System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
      Files.writeString(
          classpath,
          Stream.of(cp.split(File.pathSeparator))
              .filter(e -> !e.endsWith("test-classes") && !e.endsWith("classes"))
              .collect(Collectors.joining(":")));
    }
    List<String> command = new ArrayList<>(List.of("bash", SCRIPT.toString()));
    command.addAll(List.of(args));
    Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
    String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(process.waitFor(120, TimeUnit.SECONDS), "timed out: " + command);
    assertEquals(2, process.exitValue(), output);
    return output;
  }

  /** What the script takes for a classpath to record again. */
  private static boolean olderThanAPom(Path classpath) throws IOException {
    long recorded = Files.getLastModifiedTime(classpath).toMillis();
    try (Stream<Path> poms =
        Files.find(
            MODULE.getParent(),
            3,
            (p, a) ->
                p.getFileName().toString().equals("pom.xml")
                    && !p.toString().contains("/target/")
                    && a.lastModifiedTime().toMillis() > recorded)) {
      return poms.findAny().isPresent();
    }
  }

  private static void assertOneCleanLine(String output, String expected) {
    assertEquals(1, output.strip().lines().count(), "not one line:\n" + output);
    assertTrue(output.startsWith("error: ") && output.contains(expected), output);
    assertTrue(
        output.chars().noneMatch(c -> c < 0x20 && c != '\n'), "control characters in:\n" + output);
  }

  @Test
  void badOptionIsOneLine() throws Exception {
    assertOneCleanLine(run("--colour", "red"), "unknown option '--colour'");
  }

  @Test
  void missingInputPathIsOneLine(@TempDir Path dir) throws Exception {
    assertOneCleanLine(
        run("--items-path", dir.resolve("items").toString(), "--queries-path", dir.toString()),
        "--items-path = '" + dir.resolve("items") + "': no such file or directory");
  }

  @Test
  void moreRanksThanSlotsIsOneLineNamingTheFlag(@TempDir Path dir) throws Exception {
    assertOneCleanLine(
        run("--master", "local[1]", "--ranks", "2", "--output", dir.toString()),
        "pass --ranks 1 or fewer");
    try (Stream<Path> files = Files.list(dir)) {
      assertEquals(0, files.count(), "data generated before the check");
    }
  }
}
