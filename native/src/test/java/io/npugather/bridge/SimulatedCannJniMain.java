package io.npugather.bridge;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Random;
import java.util.concurrent.atomic.AtomicReference;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.PointerPointer;
import org.bytedeco.javacpp.SizeTPointer;

/**
 * Child-JVM program of {@link HcclOverSimulatedCannTest} and {@link LcclOverSimulatedCannTest}:
 * drives the device backend named by the first argument ("hccl" or "lccl") through the JNI library
 * over the simulated CANN runtime (never an NPU). Ranks are threads; every byte is checked. Prints
 * "N passed, N failed" last.
 */
public final class SimulatedCannJniMain {
  private static final int UINT8 = 7;
  private static final int SUCCESS = 0;
  private static final int INVALID_ARGUMENT = 1;

  private static String backend;

  private SimulatedCannJniMain() {}

  private static String lastError() {
    return NativeCore.npg_last_error().getString(StandardCharsets.UTF_8);
  }

  private static void check(boolean ok, String what) {
    if (!ok) {
      throw new IllegalStateException(what);
    }
  }

  private static void checkRc(int rc, String op) {
    check(
        rc == SUCCESS,
        op + " gave " + NativeCore.npg_result_name(rc).getString() + ": " + lastError());
  }

  private static byte[] block(int rank, int bytes, long seed) {
    byte[] b = new byte[bytes];
    new Random(seed * 31 + rank).nextBytes(b);
    return b;
  }

  /** Rank r of n: all_gather of equal blocks, then all_gather_v of ragged ones. */
  private static void rank(int r, int n, BytePointer rootInfo, long rootInfoSize) {
    Pointer comm;
    try (PointerPointer<Pointer> out = new PointerPointer<>(1)) {
      checkRc(
          NativeCore.npg_comm_init(
              backend, r, n, 0, "", 1, r, null, 20000, 0, rootInfo, rootInfoSize, out),
          "npg_comm_init");
      comm = out.get(0);
    }
    try {
      check(backend.equals(NativeCore.npg_comm_transport(comm).getString()), "transport");
      int count = 100_003;
      try (BytePointer send = new BytePointer(count);
          BytePointer recv = new BytePointer((long) count * n)) {
        send.put(block(r, count, 1));
        checkRc(
            NativeCore.npg_all_gather(comm, send.address(), recv.address(), count, UINT8),
            "npg_all_gather");
        for (int p = 0; p < n; p++) {
          byte[] got = new byte[count];
          recv.position((long) p * count).get(got);
          recv.position(0);
          check(Arrays.equals(got, block(p, count, 1)), "all_gather block of rank " + p);
        }
      }
      long[] counts = new long[n];
      long[] displs = new long[n];
      long total = 0;
      for (int p = 0; p < n; p++) {
        counts[p] = p == 1 ? 0 : 1000L * (p + 1) + 7;
        displs[p] = total;
        total += counts[p];
      }
      try (BytePointer send = new BytePointer(Math.max(1, counts[r]));
          BytePointer recv = new BytePointer(total)) {
        send.put(block(r, (int) counts[r], 2));
        checkRc(
            NativeCore.npg_all_gather_v(
                comm, send.address(), counts[r], recv.address(), counts, displs, UINT8),
            "npg_all_gather_v");
        for (int p = 0; p < n; p++) {
          byte[] got = new byte[(int) counts[p]];
          recv.position(displs[p]).get(got);
          recv.position(0);
          check(
              Arrays.equals(got, block(p, (int) counts[p], 2)), "all_gather_v block of rank " + p);
        }
      }
    } finally {
      checkRc(NativeCore.npg_comm_destroy(comm), "npg_comm_destroy");
    }
  }

  public static void main(String[] args) throws Exception {
    backend = args[0];
    NativeCore.load();
    int passed = 0;
    int failed = 0;
    for (int n = 2; n <= 3; n++) {
      String name =
          "jni_" + backend + "_all_gather_and_all_gather_v_over_simulated_cann_" + n + "_ranks";
      try (BytePointer info = new BytePointer(NativeCore.ROOT_INFO_MAX_BYTES);
          SizeTPointer size = new SizeTPointer(1)) {
        checkRc(
            NativeCore.npg_get_root_info(backend, null, info, NativeCore.ROOT_INFO_MAX_BYTES, size),
            "npg_get_root_info");
        AtomicReference<Throwable> error = new AtomicReference<>();
        Thread[] threads = new Thread[n];
        final int ranks = n;
        for (int r = 0; r < n; r++) {
          final int rank = r;
          threads[r] =
              new Thread(
                  () -> {
                    try {
                      rank(rank, ranks, info, size.get());
                    } catch (Throwable t) {
                      error.compareAndSet(null, t);
                    }
                  });
          threads[r].start();
        }
        for (Thread t : threads) {
          t.join();
        }
        if (error.get() != null) {
          throw new IllegalStateException(error.get().getMessage(), error.get());
        }
        passed++;
        System.out.println("PASS " + name);
      } catch (Exception e) {
        failed++;
        System.out.println("FAIL " + name + ": " + e.getMessage());
      }
    }
    String name = "jni_" + backend + "_without_device_id_is_an_invalid_argument";
    try (BytePointer info = new BytePointer(4124L);
        PointerPointer<Pointer> out = new PointerPointer<>(1)) {
      int rc =
          NativeCore.npg_comm_init(backend, 0, 1, 0, "", 0, -1, null, 1000, 0, info, 4124, out);
      check(
          rc == INVALID_ARGUMENT
              && lastError().contains("backend " + backend + " needs a device id"),
          "rc " + rc + ": " + lastError());
      passed++;
      System.out.println("PASS " + name);
    } catch (Exception e) {
      failed++;
      System.out.println("FAIL " + name + ": " + e.getMessage());
    }
    name = "jni_" + backend + "_vendor_error_of_a_failed_call_names_library_code_and_rank";
    try (BytePointer info = new BytePointer(NativeCore.ROOT_INFO_MAX_BYTES);
        SizeTPointer size = new SizeTPointer(1);
        PointerPointer<Pointer> out = new PointerPointer<>(1)) {
      checkRc(
          NativeCore.npg_get_root_info(backend, null, info, NativeCore.ROOT_INFO_MAX_BYTES, size),
          "npg_get_root_info");
      check(NativeCore.npg_last_vendor_library().getString().isEmpty(), "cleared by success");
      int rc =
          NativeCore.npg_comm_init(
              backend, 0, 1, 0, "", 0, 99, null, 1000, 0, info, size.get(), out);
      String vendor =
          NativeCore.npg_last_vendor_library().getString()
              + " "
              + NativeCore.npg_last_vendor_code()
              + " "
              + NativeCore.npg_last_vendor_code_name().getString()
              + " rank "
              + NativeCore.npg_last_vendor_rank();
      check(
          rc == INVALID_ARGUMENT
              && vendor.equals("ACL 107001 ACL_ERROR_RT_INVALID_DEVICEID rank 0")
              && NativeCore.npg_last_vendor_message()
                  .getString()
                  .contains("device 99 does not exist"),
          "rc " + rc + ", vendor " + vendor + ": " + lastError());
      passed++;
      System.out.println("PASS " + name);
    } catch (Exception e) {
      failed++;
      System.out.println("FAIL " + name + ": " + e.getMessage());
    }
    System.out.println(passed + " passed, " + failed + " failed");
    System.exit(failed == 0 ? 0 : 1);
  }
}
