package io.npugather.bridge;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.bytedeco.javacpp.Loader;
import org.junit.jupiter.api.Test;

/**
 * A JVM on linux-arm64 (Debian's openjdk-17-jre-headless:arm64 under qemu-aarch64) loads the JNI
 * library from the packaged jar and completes gathers: {@link SimulatedCannJniMain} over the
 * simulated CANN runtime built for arm64. Runs after {@code package} (failsafe), so the library
 * comes out of the jar the way it does on a Kunpeng host.
 */
class NativeCoreOnLinuxArm64IT {
  @Test
  void arm64JvmLoadsTheLibraryFromTheJarAndGathers() throws Exception {
    String qemu = LinuxArm64.needEmulation();
    LinuxArm64.need(
        Files.isExecutable(LinuxArm64.JAVA),
        "missing " + LinuxArm64.JAVA + " (install openjdk-17-jre-headless:arm64)");
    Path jar =
        Path.of(NativeCore.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    assertTrue(jar.toString().endsWith(".jar"), "NativeCore not loaded from the jar: " + jar);
    Path javacpp =
        Path.of(Loader.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    String classPath =
        String.join(
            File.pathSeparator,
            jar.toString(),
            SimulatedCann.MODULE.resolve("target/test-classes").toString(),
            javacpp.toString());
    Path libDir = LinuxArm64UnderQemuTest.buildSimulatedCann().resolve("lib64");
    for (String backend : List.of("hccl", "lccl")) {
      // C1 only and the serial collector: the emulated JVM starts in seconds rather than a minute.
      SimulatedCann.run(
          List.of(
              qemu,
              LinuxArm64.JAVA.toString(),
              "-XX:TieredStopAtLevel=1",
              "-XX:+UseSerialGC",
              "-cp",
              classPath,
              SimulatedCannJniMain.class.getName(),
              backend),
          libDir,
          false);
    }
  }
}
