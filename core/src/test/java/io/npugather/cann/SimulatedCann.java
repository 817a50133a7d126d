package io.npugather.cann;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * The simulated CANN runtime of the native module's tests (test-only libascendcl.so / libhccl.so /
 * liblcal.so on host memory, {@code native/src/test/cpp/fake_cann}), built once per test JVM into
 * {@code target/fake-cann/lib64}. The connector's surefire configuration points
 * NPUGATHER_CANN_LIB_DIR there. It exercises the binding, never NPU hardware.
 */
public final class SimulatedCann {
  private static final Path MODULE = Path.of(System.getProperty("user.dir"));
  private static final Path BUILD_SCRIPT =
      MODULE.resolveSibling("native/src/test/cpp/fake_cann/build-fake-cann.sh");

  /** Where the libraries land; the surefire configuration names the same folder. */
  public static final Path LIB_DIR = MODULE.resolve("target/fake-cann/lib64");

  private static boolean built;

  private SimulatedCann() {}

  /** Builds the libraries (once per JVM) and returns their folder. */
  public static synchronized Path libDir() {
    if (!built) {
      try {
        Process p =
            new ProcessBuilder("bash", BUILD_SCRIPT.toString(), LIB_DIR.getParent().toString())
                .redirectErrorStream(true)
                .start();
        String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(300, TimeUnit.SECONDS)) {
          p.destroyForcibly();
          throw new IllegalStateException("building the simulated CANN runtime timed out");
        }
        if (p.exitValue() != 0) {
          throw new IllegalStateException(BUILD_SCRIPT + " failed:\n" + output);
        }
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while building the simulated CANN runtime", e);
      }
      built = true;
    }
    return LIB_DIR;
  }
}
