package io.npugather.bridge;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The linux-arm64 build ({@link LinuxArm64}): the JNI library sits beside the linux-x86_64 one, and
 * the host backend's collective test programs and the hccl / lccl backends over the simulated CANN
 * runtime (built for arm64 too) pass under qemu-aarch64.
 */
class LinuxArm64UnderQemuTest {
  private static final Path MODULE = SimulatedCann.MODULE;
  private static final int EM_X86_64 = 62;
  private static final int EM_AARCH64 = 183;

  /** What one test program may take under the emulator, compiled at -O2. */
  private static final long PROGRAM_LIMIT_SECONDS = 120;

  /**
   * What qemu-user does not emulate: madvise(MADV_HUGEPAGE) is accepted and ignored, and
   * process_vm_readv is missing (the core falls back to staging, which other tests cover).
   */
  private static final List<String> NOT_EMULATED =
      List.of(
          "--skip=large_receive_buffer_is_advised_for_huge_pages",
          "--skip=processes_gather_through_cross_memory_attach");

  private static int elfMachine(Path library) throws Exception {
    try (RandomAccessFile file = new RandomAccessFile(library.toFile(), "r")) {
      file.seek(18); // e_machine, little-endian
      return file.read() | file.read() << 8;
    }
  }

  @Test
  void jniLibraryIsBuiltForBothPlatforms() throws Exception {
    Path bridge = MODULE.resolve("target/classes/io/npugather/bridge");
    assertEquals(EM_X86_64, elfMachine(bridge.resolve("linux-x86_64/libjniNativeCore.so")));
    Path arm64 = bridge.resolve("linux-arm64/libjniNativeCore.so");
    LinuxArm64.need(
        Files.isRegularFile(arm64), "missing " + arm64 + " (install g++-aarch64-linux-gnu)");
    assertEquals(EM_AARCH64, elfMachine(arm64));
  }

  /**
   * The host backend's collective tests, one program a topic ({@code host_collective_*_test.cc}),
   * each bounded by {@link #PROGRAM_LIMIT_SECONDS} under the emulator.
   */
  @Test
  void hostCollectiveTestsPassUnderQemu() throws Exception {
    String qemu = LinuxArm64.needEmulation();
    List<Path> sources = hostCollectiveSources();
    assertTrue(sources.size() >= 5, "missing host collective test programs: " + sources);
    List<List<String>> compilations = new ArrayList<>();
    List<Path> binaries = new ArrayList<>();
    for (Path source : sources) {
      String name = source.getFileName().toString().replace(".cc", "");
      Path binary = MODULE.resolve("target/native-linux-arm64/" + name);
      binaries.add(binary);
      compilations.add(LinuxArm64.compileCommand(source, binary, "-O2", true));
    }
    NativeCoreCppTest.runSideBySide(compilations, 300);
    for (Path binary : binaries) {
      List<String> command = new ArrayList<>(List.of(qemu, binary.toString()));
      command.addAll(NOT_EMULATED);
      NativeCoreCppTest.assertAllPassed(NativeCoreCppTest.run(command, PROGRAM_LIMIT_SECONDS));
    }
  }

  private static List<Path> hostCollectiveSources() throws IOException {
    try (Stream<Path> files = Files.list(MODULE.resolve("src/test/cpp"))) {
      return files
          .filter(p -> p.getFileName().toString().matches("host_collective_.*_test\\.cc"))
          .sorted()
          .toList();
    }
  }

  @Test
  void hcclAndLcclOverSimulatedCannPassUnderQemu() throws Exception {
    String qemu = LinuxArm64.needEmulation();
    Path out = buildSimulatedCann();
    for (String program :
        List.of("hccl_over_simulated_cann_test", "lccl_over_simulated_cann_test")) {
      Path binary = out.resolve(program);
      // Optimised: under the emulator, running the checks costs more than compiling them.
      NativeCoreCppTest.run(
          LinuxArm64.compileCommand(
              MODULE.resolve("src/test/cpp/fake_cann/" + program + ".cc"), binary, "-O2", false),
          300);
      // A test that starts ranks as fresh processes runs them under the emulator too.
      SimulatedCann.run(
          List.of(qemu, binary.toString(), "full"),
          out.resolve("lib64"),
          false,
          Map.of("NPUGATHER_TEST_EMULATOR", qemu));
    }
  }

  /** The simulated CANN runtime for arm64: OUT/lib64 as build-fake-cann.sh lays it out. */
  static synchronized Path buildSimulatedCann() throws Exception {
    Path out = MODULE.resolve("target/fake-cann-linux-arm64");
    ProcessBuilder builder =
        new ProcessBuilder(
                "bash",
                MODULE.resolve("src/test/cpp/fake_cann/build-fake-cann.sh").toString(),
                out.toString())
            .redirectErrorStream(true);
    builder.environment().put("CXX", LinuxArm64.CXX);
    Process process = builder.start();
    String output = new String(process.getInputStream().readAllBytes());
    assertEquals(0, process.waitFor(), "build-fake-cann.sh for arm64:\n" + output);
    assertTrue(Files.isRegularFile(out.resolve("lib64/libhccl.so")), output);
    return out;
  }
}
