package io.npugather.bridge;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * What the linux-arm64 checks need: the cross-compiled core archive (build-core.sh ...
 * linux-arm64), Debian's cross compiler, and qemu-user with the arm64 C/C++ runtime from Debian's
 * multiarch packages (libc6:arm64, libstdc++6:arm64). Programs run as {@code qemu-aarch64 PROGRAM},
 * which finds the arm64 loader at /lib/ld-linux-aarch64.so.1; qemu's {@code -L} prefix is not used
 * because qemu 7.2 hangs a dynamically linked program under it as soon as it starts a thread.
 *
 * <p>Without these the checks are skipped and say why, unless the build was run with {@code
 * -Dnpugather.arm64=required} (CI), which turns every missing piece into a failure.
 */
final class LinuxArm64 {
  static final String CXX = "aarch64-linux-gnu-g++";
  static final Path CORE_ARCHIVE =
      SimulatedCann.MODULE.resolve("target/native-linux-arm64/libnpugather_core.a");
  static final Path LOADER = Path.of("/lib/ld-linux-aarch64.so.1");
  static final Path JAVA = Path.of("/usr/lib/jvm/java-17-openjdk-arm64/bin/java");

  private LinuxArm64() {}

  static boolean required() {
    return "required".equals(System.getProperty("npugather.arm64"));
  }

  /**
   * Skips (or, when required, fails) unless ok; message names what is missing and how to get it.
   */
  static void need(boolean ok, String message) {
    if (required()) {
      assertTrue(ok, message);
    } else {
      assumeTrue(ok, message + "; linux-arm64 not tested");
    }
  }

  /** The qemu-aarch64 on PATH (Debian qemu-user or qemu-user-static). */
  static String qemu() {
    for (String name : List.of("qemu-aarch64", "qemu-aarch64-static")) {
      String path = System.getenv().getOrDefault("PATH", "/usr/bin:/bin");
      for (String dir : path.split(":")) {
        if (Files.isExecutable(Path.of(dir, name))) {
          return Path.of(dir, name).toString();
        }
      }
    }
    return null;
  }

  /** Asserts the arm64 core archive, the loader and qemu are there; returns the qemu command. */
  static String needEmulation() {
    need(
        Files.isRegularFile(CORE_ARCHIVE),
        "missing " + CORE_ARCHIVE + " (install g++-aarch64-linux-gnu)");
    String qemu = qemu();
    need(qemu != null, "qemu-aarch64 not found (install qemu-user)");
    need(
        Files.exists(LOADER),
        "missing " + LOADER + " (dpkg --add-architecture arm64; install libstdc++6:arm64)");
    return qemu;
  }

  /**
   * The C++ test programs of native/src/test/cpp, each compiled for arm64 with the core archive.
   */
  static List<String> compileCommand(
      Path source, Path binary, String optimisation, boolean coreHeaders) {
    List<String> command =
        new ArrayList<>(
            List.of(
                CXX,
                "-std=c++17",
                optimisation,
                "-pthread",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-Isrc/main/cpp/include"));
    if (coreHeaders) {
      command.add("-Isrc/main/cpp");
    }
    command.addAll(List.of(source.toString(), CORE_ARCHIVE.toString(), "-o", binary.toString()));
    return command;
  }
}
