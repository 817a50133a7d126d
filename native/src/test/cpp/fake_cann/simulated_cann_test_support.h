// What the tests of the device backends over the simulated CANN runtime share, on the one
// harness (support/test_harness.h): vendor error checks, random blocks checked byte by byte,
// leak checks through the runtime's counters and /dev/shm, and the runner of a suite. No NPU
// is involved: the tests prove the binding.
#ifndef NPUGATHER_TEST_SIMULATED_CANN_TEST_SUPPORT_H_
#define NPUGATHER_TEST_SIMULATED_CANN_TEST_SUPPORT_H_

#include <dirent.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../support/block_layout.h"
#include "../support/test_harness.h"
#include "npugather.h"

namespace {

using namespace npgtest;

void expect_text(const std::string& text, const std::vector<std::string>& parts) {
  for (const std::string& p : parts)
    if (!contains(text, p)) throw TestFailure("error text lacks \"" + p + "\": " + text);
}

// The vendor part of the calling thread's last error.
void expect_vendor(const std::string& library, int64_t code, const std::string& code_name, int32_t rank,
                   const std::string& message_part = "") {
  const std::string got = std::string(npg_last_vendor_library()) + " " + std::to_string(npg_last_vendor_code()) + " " +
                          npg_last_vendor_code_name() + " rank " + std::to_string(npg_last_vendor_rank());
  const std::string want = library + " " + std::to_string(code) + " " + code_name + " rank " + std::to_string(rank);
  if (got != want) throw TestFailure("vendor error is \"" + got + "\", expected \"" + want + "\"");
  if (!message_part.empty()) expect_text(npg_last_vendor_message(), {message_part});
}

void expect_no_vendor() {
  CHECK(std::string(npg_last_vendor_library()).empty());
  CHECK(npg_last_vendor_code() == 0 && npg_last_vendor_rank() == -1);
  CHECK(std::string(npg_last_vendor_code_name()).empty() && std::string(npg_last_vendor_message()).empty());
}

// Prints an error text once per test, so a run's log shows what users would read.
void show(const char* what) { printf("  %s: %s\n", what, npg_last_error()); }

// Deterministic bytes of rank r for a seed: any rank can rebuild any other rank's block.
void fill(uint8_t* p, uint64_t len, uint64_t seed, int r) {
  std::mt19937_64 rng(seed * 7919 + static_cast<uint64_t>(r) * 104729 + 1);
  for (uint64_t i = 0; i < len; ++i) p[i] = static_cast<uint8_t>(rng() >> 13);
}

constexpr uint8_t kUntouched = 0xA5;

// Different sizes (one empty), stored in reverse rank order with gaps.
Layout ragged_blocks(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Layout l;
  l.counts.resize(n);
  l.displs.resize(n);
  for (int r = 0; r < n; ++r) l.counts[r] = r == 1 ? 0 : 1 + rng() % 70000;
  uint64_t at = 0;
  for (int r = n - 1; r >= 0; --r) {
    at += 1 + rng() % 5;
    l.displs[r] = at;
    at += l.counts[r];
  }
  l.recv_elems = at + 2;
  return l;
}

// Gathers with npg_all_gather(_v) and checks every byte, the gaps included.
void gather_checked(npg_comm_t comm, int rank, int n, const Layout& l, npg_dtype_t dtype, bool use_v, uint64_t seed,
                    bool in_place = false) {
  const size_t w = npg_dtype_size(dtype);
  std::vector<uint8_t> recv(l.recv_elems * w, kUntouched);
  std::vector<uint8_t> send(l.counts[rank] * w + 1);
  uint8_t* src = in_place ? recv.data() + l.displs[rank] * w : send.data();
  fill(src, l.counts[rank] * w, seed, rank);
  if (use_v) {
    CHECK_RC(npg_all_gather_v(comm, src, l.counts[rank], recv.data(), l.counts.data(), l.displs.data(), dtype),
             NPG_SUCCESS);
  } else {
    CHECK_RC(npg_all_gather(comm, src, recv.data(), l.counts[rank], dtype), NPG_SUCCESS);
  }
  std::vector<uint8_t> expected(l.recv_elems * w, kUntouched);
  for (int r = 0; r < n; ++r) fill(expected.data() + l.displs[r] * w, l.counts[r] * w, seed, r);
  for (size_t i = 0; i < recv.size(); ++i) {
    if (recv[i] != expected[i]) {
      throw TestFailure("rank " + std::to_string(rank) + ": byte " + std::to_string(i) + " is " +
                        std::to_string(recv[i]) + ", expected " + std::to_string(expected[i]));
    }
  }
}

// Ragged blocks that add up to about total bytes (one empty), stored in reverse rank order with gaps.
Layout ragged_blocks_of_total(int n, uint64_t total, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> weights(n);
  uint64_t sum = 0;
  for (int r = 0; r < n; ++r) sum += weights[r] = r == 1 ? 0 : 1 + rng() % 1000;
  Layout l;
  l.counts.resize(n);
  l.displs.resize(n);
  for (int r = 0; r < n; ++r) l.counts[r] = weights[r] == 0 ? 0 : total / sum * weights[r] + rng() % 4099;
  uint64_t at = 0;
  for (int r = n - 1; r >= 0; --r) {
    at += 1 + rng() % 5;
    l.displs[r] = at;
    at += l.counts[r];
  }
  l.recv_elems = at + 2;
  return l;
}

// Leak check through the simulated runtime's counters and /dev/shm.
template <typename Fn>
Fn fake_symbol(const char* lib, const char* name) {
  std::string path = std::string(getenv("NPUGATHER_CANN_LIB_DIR")) + "/" + lib;
  void* h = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (h == nullptr) throw TestFailure(path + " is not loaded");
  Fn fn = reinterpret_cast<Fn>(dlsym(h, name));
  dlclose(h);
  if (fn == nullptr) throw TestFailure(std::string(name) + " not found");
  return fn;
}

// The simulated ACL runtime's entry points that tests call directly (the libraries are loaded).
struct AclEntryPoints {
  int (*set_device)(int32_t) = fake_symbol<int (*)(int32_t)>("libascendcl.so", "aclrtSetDevice");
  int (*reset_device)(int32_t) = fake_symbol<int (*)(int32_t)>("libascendcl.so", "aclrtResetDevice");
  int (*create_stream)(void**) = fake_symbol<int (*)(void**)>("libascendcl.so", "aclrtCreateStream");
  int (*destroy_stream)(void*) = fake_symbol<int (*)(void*)>("libascendcl.so", "aclrtDestroyStream");
  int (*synchronize)(void*) = fake_symbol<int (*)(void*)>("libascendcl.so", "aclrtSynchronizeStream");
  int (*malloc_device)(void**, size_t, int) = fake_symbol<int (*)(void**, size_t, int)>("libascendcl.so",
                                                                                        "aclrtMalloc");
  int (*free_device)(void*) = fake_symbol<int (*)(void*)>("libascendcl.so", "aclrtFree");
};

std::vector<std::string> shm_leftovers() {
  std::vector<std::string> out;
  std::string prefix = "npgfake-" + std::to_string(getpid()) + "-";
  DIR* d = opendir("/dev/shm");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d))
    if (strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0 || strncmp(e->d_name, "npgfake-rt-", 11) == 0 ||
        strncmp(e->d_name, "npgfake-lcaldom-", 16) == 0)
      out.push_back(e->d_name);
  closedir(d);
  return out;
}

void expect_nothing_leaked() {
  int allocations = fake_symbol<int (*)()>("libascendcl.so", "npgFakeCannLiveAllocations")();
  int streams = fake_symbol<int (*)()>("libascendcl.so", "npgFakeCannLiveStreams")();
  int comms = fake_symbol<int (*)()>("libascendcl.so", "npgFakeCannLiveComms")();
  long long bytes = fake_symbol<long long (*)()>("libascendcl.so", "npgFakeCannLiveDeviceBytes")();
  if (allocations != 0 || bytes != 0 || streams != 0 || comms != 0) {
    throw TestFailure("leaked: " + std::to_string(allocations) + " device allocations (" + std::to_string(bytes) +
                      " bytes), " + std::to_string(streams) + " streams, " + std::to_string(comms) +
                      " vendor communicators");
  }
  auto left = shm_leftovers();
  if (!left.empty()) throw TestFailure("shared memory left behind: /dev/shm/" + left[0]);
}

// How often this process reset a device (aclrtResetDevice / aclrtResetDeviceForce).
inline int device_resets() { return fake_symbol<int (*)()>("libascendcl.so", "npgFakeCannDeviceResets")(); }

// How many error messages the real runtime would have reported for this process's stream waits
// (each expired aclrtSynchronizeStream(WithTimeout) logs at ERROR and reports one).
inline int vendor_error_reports() { return fake_symbol<int (*)()>("libascendcl.so", "npgFakeCannErrorReports")(); }

// Sets an environment variable for one test (the simulated runtime reads it at call time),
// then restores the previous value.
struct ScopedEnv {
  std::string name;
  bool had = false;
  std::string previous;
  ScopedEnv(const char* n, const std::string& value) : name(n) {
    const char* old = getenv(n);
    had = old != nullptr;
    if (had) previous = old;
    setenv(n, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had)
      setenv(name.c_str(), previous.c_str(), 1);
    else
      unsetenv(name.c_str());
  }
};

// The simulated device memory of the tests that gather more than a device holds.
constexpr uint64_t kSimulatedDeviceMemory = 1 << 20;

// On each of n thread ranks (rank r on device r, comm made by join): gathers 4 and 16 times the
// simulated device memory, equal and ragged (all-gather-v or padded, as the backend chooses),
// every byte checked, and checks that no device held more than budget at once. Sets
// NPUGATHER_FAKE_CANN_DEVICE_MEMORY to kSimulatedDeviceMemory for the communicators it makes.
void expect_gathers_beyond_device_memory(int n, const std::function<npg_comm_t(int)>& join, uint64_t budget,
                                         uint64_t seed) {
  ScopedEnv memory("NPUGATHER_FAKE_CANN_DEVICE_MEMORY", std::to_string(kSimulatedDeviceMemory));
  fake_symbol<void (*)()>("libascendcl.so", "npgFakeCannResetPeakDeviceBytes")();
  run_ranks(n, [&](int r) {
    npg_comm_t comm = join(r);
    uint64_t k = 0;
    for (uint64_t times : {4, 16}) {
      const uint64_t total = times * kSimulatedDeviceMemory;
      for (bool ragged : {false, true}) {
        Layout l = ragged ? ragged_blocks_of_total(n, total, seed + k) : equal_layout(n, total / n + 333);
        gather_checked(comm, r, n, l, NPG_UINT8, ragged, seed + 100 + k++);
        uint64_t used = 0;
        CHECK_RC(npg_comm_device_bytes(comm, &used), NPG_SUCCESS);
        if (used == 0 || used > budget) {
          throw TestFailure("a gather of " + std::to_string(times) + "x the device memory held " +
                            std::to_string(used) + " device bytes, the budget is " + std::to_string(budget));
        }
      }
    }
    const long long peak = fake_symbol<long long (*)(int)>("libascendcl.so", "npgFakeCannPeakDeviceBytes")(r);
    if (peak <= 0 || static_cast<uint64_t>(peak) > budget) {
      throw TestFailure("device " + std::to_string(r) + " held " + std::to_string(peak) +
                        " bytes at once, the budget is " + std::to_string(budget));
    }
    CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
  });
  expect_nothing_leaked();
}

// Runs fn(rank) in n forked processes, each checking for leaks after fn; fails when one does.
void on_processes(int n, const std::function<void(int)>& fn) {
  run_processes(n, fn, 60000, [](int) { expect_nothing_leaked(); });
}

// With collectives hanging (NPUGATHER_FAKE_CANN_HANG), every rank blocks in a gather; an abort of
// every communicator from another thread ends each within a second with NPG_ABORTED, and later
// calls fail the same way. Destroys the communicators.
void expect_abort_ends_blocked_gathers(npg_comm_t* comms, int n) {
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    for (int r = 0; r < n; ++r) npg_comm_abort(comms[r]);
  });
  auto t0 = Clock::now();
  run_ranks(n, [&](int r) {
    std::vector<uint8_t> send(64), recv(64 * n);
    CHECK(npg_all_gather(comms[r], send.data(), recv.data(), 64, NPG_UINT8) == NPG_ABORTED);
    expect_text(npg_last_error(), {"aborted"});
    CHECK(npg_all_gather(comms[r], send.data(), recv.data(), 64, NPG_UINT8) == NPG_ABORTED);
  });
  aborter.join();
  CHECK(ms_since(t0) < 1500);
  for (int r = 0; r < n; ++r) CHECK_RC(npg_comm_destroy(comms[r]), NPG_SUCCESS);
  expect_nothing_leaked();
}

// Runs the tests of the suite named by the first argument over the libraries of
// NPUGATHER_CANN_LIB_DIR (see run_tests for the other arguments).
template <size_t N>
int run_simulated_cann_tests(int argc, char** argv, const TestCase (&tests)[N], const char* suites) {
  if (getenv("NPUGATHER_CANN_LIB_DIR") == nullptr) {
    fprintf(stderr, "usage: NPUGATHER_CANN_LIB_DIR=DIR %s %s [FILTER]\n", argv[0], suites);
    return 2;
  }
  // Bounds the simulated rendezvous, so one failed test cannot stall the next ones for 120 s.
  setenv("NPUGATHER_FAKE_CANN_CONNECT_TIMEOUT_MS", "10000", 0);
  RunOptions options;
  options.suites = suites;
  return run_tests(argc, argv, tests, options);
}

}  // namespace

#endif  // NPUGATHER_TEST_SIMULATED_CANN_TEST_SUPPORT_H_
