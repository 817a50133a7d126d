package io.npugather.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * The simulated CANN runtime (test-only libascendcl.so / libhccl.so / liblcal.so on host memory,
 * built by the native module's {@code build-fake-cann.sh}), laid out like a CANN install: {@code
 * home()/lib64}. It exercises the binding and the Spark resource path, never NPU hardware.
 */
final class SimulatedCann {
  private static final Path MODULE = Path.of(System.getProperty("user.dir"));
  private static final Path HOME = MODULE.resolve("target/fake-cann");
  private static boolean built;

  private SimulatedCann() {}

  /** Builds the libraries once per test JVM; returns the install folder (with lib64/). */
  static synchronized Path home() throws Exception {
    if (!built) {
      Path script = MODULE.resolveSibling("native/src/test/cpp/fake_cann/build-fake-cann.sh");
      Process p =
          new ProcessBuilder("bash", script.toString(), HOME.toString())
              .redirectErrorStream(true)
              .start();
      String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      assertTrue(p.waitFor(300, TimeUnit.SECONDS), "timed out: " + script);
      assertEquals(0, p.exitValue(), script + "\n" + output);
      built = true;
    }
    return HOME;
  }
}
