// Checks, ranks as threads and the runner for the hardening tests of the C ABI and the
// host backend's listeners. The last line of output is "N passed, N failed".
#ifndef NPUGATHER_TEST_HARDENING_TEST_SUPPORT_H_
#define NPUGATHER_TEST_HARDENING_TEST_SUPPORT_H_

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "npugather.h"

namespace hardening {

using Clock = std::chrono::steady_clock;

struct TestFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline std::string where(const char* file, int line) { return std::string(file) + ":" + std::to_string(line) + ": "; }

#define CHECK(cond)                                                                                       \
  do {                                                                                                    \
    if (!(cond)) throw hardening::TestFailure(hardening::where(__FILE__, __LINE__) + "CHECK(" #cond ")"); \
  } while (0)

#define CHECK_RC(expr, expected)                                                                                      \
  do {                                                                                                                \
    npg_result_t rc_ = (expr);                                                                                        \
    if (rc_ != (expected)) {                                                                                          \
      throw hardening::TestFailure(hardening::where(__FILE__, __LINE__) + #expr " returned " + npg_result_name(rc_) + \
                                   ", expected " + npg_result_name(expected) + " (last error: " + npg_last_error() +  \
                                   ")");                                                                              \
    }                                                                                                                 \
  } while (0)

#define CHECK_OK(expr) CHECK_RC(expr, NPG_SUCCESS)

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

inline void sleep_ms(int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Runs fn(rank) on n threads; rethrows the first failure after all joined.
inline void run_ranks(int n, const std::function<void(int)>& fn) {
  std::mutex mutex;
  std::string first;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mutex);
        if (first.empty()) first = "rank " + std::to_string(r) + ": " + e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (!first.empty()) throw TestFailure(first);
}

inline std::vector<uint8_t> make_root_info(const char* bind = "127.0.0.1") {
  std::vector<uint8_t> info(NPG_ROOT_INFO_MAX_BYTES);
  size_t size = 0;
  CHECK_OK(npg_get_root_info("host", bind, info.data(), info.size(), &size));
  info.resize(size);
  return info;
}

inline npg_comm_t init_rank(int rank, int n, const std::vector<uint8_t>& info, uint32_t flags = 0,
                            int64_t timeout_ms = 20000) {
  npg_comm_t comm = nullptr;
  CHECK_OK(npg_comm_init("host", rank, n, 0, "hardening", NPG_COMM_MULTI_THREAD, -1, nullptr, timeout_ms, flags,
                         info.data(), info.size(), &comm));
  CHECK(comm != nullptr);
  return comm;
}

inline uint8_t pattern_byte(uint64_t seed, int rank, uint64_t i) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(rank) * 0xbf58476d1ce4e5b9ull + i;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return static_cast<uint8_t>(x ^ (x >> 31));
}

// One all-gather of count random bytes per rank; every received byte is checked.
inline void gather_and_verify(npg_comm_t comm, int rank, int n, uint64_t count, uint64_t seed) {
  std::vector<uint8_t> send(count), recv(count * n);
  for (uint64_t i = 0; i < count; ++i) send[i] = pattern_byte(seed, rank, i);
  CHECK_OK(npg_all_gather(comm, send.data(), recv.data(), count, NPG_UINT8));
  for (int r = 0; r < n; ++r) {
    for (uint64_t i = 0; i < count; ++i) {
      if (recv[r * count + i] != pattern_byte(seed, r, i)) {
        throw TestFailure("byte " + std::to_string(i) + " of rank " + std::to_string(r) + "'s block differs");
      }
    }
  }
}

// Entries of a /proc directory (open fds, threads) or lines of a /proc file (mappings).
inline int64_t count_dir_entries(const char* path) {
  int64_t n = 0;
  if (DIR* dir = opendir(path)) {
    while (dirent* e = readdir(dir)) n += e->d_name[0] != '.';
    closedir(dir);
  }
  return n;
}

inline int64_t count_lines(const char* path) {
  int64_t n = 0;
  if (FILE* f = fopen(path, "r")) {
    for (int c; (c = fgetc(f)) != EOF;) n += c == '\n';
    fclose(f);
  }
  return n;
}

inline int64_t open_fds() { return count_dir_entries("/proc/self/fd"); }

struct TestCase {
  const char* name;
  void (*fn)();
};

// Runs the tests whose name contains argv[1] (all without it); every communicator a test
// made must be destroyed by its end.
inline int run_tests(const TestCase* tests, size_t count, int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  int passed = 0;
  int failed = 0;
  for (size_t i = 0; i < count; ++i) {
    const TestCase& t = tests[i];
    if (argc > 1 && !contains(t.name, argv[1])) continue;
    auto t0 = Clock::now();
    try {
      t.fn();
      if (npg_live_comms() != 0) throw TestFailure(std::to_string(npg_live_comms()) + " communicators left alive");
      ++passed;
      printf("PASS %s (%.0f ms)\n", t.name, ms_since(t0));
    } catch (const std::exception& e) {
      ++failed;
      printf("FAIL %s (%.0f ms): %s\n", t.name, ms_since(t0), e.what());
    }
    fflush(stdout);
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace hardening

#endif  // NPUGATHER_TEST_HARDENING_TEST_SUPPORT_H_
