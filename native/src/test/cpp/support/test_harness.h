// The harness of every C++ test program: the failure type and the CHECK macros, ranks as
// threads or as forked processes, and the runner. A test is a function that throws TestFailure;
// the runner gives each a time limit (a hang fails that test by name and ends the program),
// checks that no communicator outlives it, and ends the output with "N passed, N failed".
#ifndef NPUGATHER_TEST_SUPPORT_TEST_HARNESS_H_
#define NPUGATHER_TEST_SUPPORT_TEST_HARNESS_H_

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "npugather.h"

namespace npgtest {

using Clock = std::chrono::steady_clock;

struct TestFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline std::string where(const char* file, int line) { return std::string(file) + ":" + std::to_string(line) + ": "; }

#define CHECK(cond)                                                                                   \
  do {                                                                                                \
    if (!(cond)) throw npgtest::TestFailure(npgtest::where(__FILE__, __LINE__) + "CHECK(" #cond ")"); \
  } while (0)

// expr, a C ABI call, returns expected; the failure names both codes and the last error text.
#define CHECK_RC(expr, expected)                                                                                   \
  do {                                                                                                             \
    npg_result_t rc_ = (expr);                                                                                     \
    if (rc_ != (expected)) {                                                                                       \
      throw npgtest::TestFailure(npgtest::where(__FILE__, __LINE__) + #expr " returned " + npg_result_name(rc_) +  \
                                 ", expected " + npg_result_name(expected) + " (last error: " + npg_last_error() + \
                                 ")");                                                                             \
    }                                                                                                              \
  } while (0)

#define CHECK_OK(expr) CHECK_RC(expr, NPG_SUCCESS)

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

inline void sleep_ms(int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// ---------------------------------------------------------------- ranks as threads

// Runs fn(rank) on n threads; rethrows the first failure, naming its rank, once all joined.
// A rank that never returns is caught by the runner's time limit.
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

// ---------------------------------------------------------------- ranks as processes

namespace detail {

// The running test's children that have not been waited for, killed when it overruns its
// limit: slots a signal handler can read (0 = free).
constexpr int kMaxChildren = 256;

inline std::atomic<pid_t>* child_slots() {
  static std::atomic<pid_t> slots[kMaxChildren];
  return slots;
}

// What the program prints when the running test overruns its limit, written before it starts.
inline std::string& overrun_message() {
  static std::string message;
  return message;
}

// SIGALRM: the running test overran its limit. Kills its children, says so and ends the
// program (async-signal-safe calls only).
inline void on_overrun(int) {
  for (int i = 0; i < kMaxChildren; ++i) {
    const pid_t pid = child_slots()[i].load();
    if (pid > 0) kill(pid, SIGKILL);
  }
  const std::string& message = overrun_message();
  const ssize_t written = write(STDOUT_FILENO, message.data(), message.size());
  (void)written;  // exiting either way
  _exit(1);
}

}  // namespace detail

// Forks a child that runs body and exits with what it returns; a failure it throws is printed
// to stderr and exits 1. The caller reaps it with wait_children.
inline pid_t fork_child(const std::function<int()>& body) {
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) throw TestFailure("fork failed");
  if (pid == 0) {
    for (int i = 0; i < detail::kMaxChildren; ++i) detail::child_slots()[i].store(0);  // the parent's
    int code = 1;
    try {
      code = body();
    } catch (const std::exception& e) {
      fprintf(stderr, "child %d: %s\n", static_cast<int>(getpid()), e.what());
    }
    fflush(stdout);
    fflush(stderr);
    _exit(code);
  }
  for (int i = 0; i < detail::kMaxChildren; ++i) {
    pid_t free_slot = 0;
    if (detail::child_slots()[i].compare_exchange_strong(free_slot, pid)) return pid;
  }
  kill(pid, SIGKILL);
  throw TestFailure("more than " + std::to_string(detail::kMaxChildren) + " children at once");
}

// Waits for the children; kills those still running after limit_ms. Returns their exit codes,
// minus the signal for one that a signal ended.
inline std::vector<int> wait_children(const std::vector<pid_t>& pids, double limit_ms) {
  constexpr int kRunning = -1000;
  std::vector<int> codes(pids.size(), kRunning);
  auto t0 = Clock::now();
  size_t left = pids.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (codes[i] != kRunning) continue;
      int status = 0;
      if (waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
        --left;
      }
    }
    if (left > 0 && ms_since(t0) > limit_ms) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (codes[i] == kRunning) kill(pids[i], SIGKILL);
      limit_ms = 1e18;
    }
    if (left > 0) usleep(2000);
  }
  for (pid_t pid : pids) {
    for (int i = 0; i < detail::kMaxChildren; ++i) {
      pid_t reaped = pid;
      if (detail::child_slots()[i].compare_exchange_strong(reaped, 0)) break;
    }
  }
  return codes;
}

// Runs fn(rank) in n forked processes, then after(rank) in each (a leak check, say); fails
// naming every rank that failed or was still running after limit_ms.
inline void run_processes(int n, const std::function<void(int)>& fn, double limit_ms = 60000,
                          const std::function<void(int)>& after = nullptr) {
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pids.push_back(fork_child([&, r] {
      try {
        fn(r);
        if (after) after(r);
      } catch (const std::exception& e) {
        fprintf(stderr, "process rank %d: %s\n", r, e.what());
        return 1;
      }
      return 0;
    }));
  }
  const std::vector<int> codes = wait_children(pids, limit_ms);
  std::string failed;
  for (int r = 0; r < n; ++r) {
    if (codes[r] != 0) failed += " rank " + std::to_string(r) + " (exit " + std::to_string(codes[r]) + ")";
  }
  if (!failed.empty()) throw TestFailure("process ranks failed or were killed after the limit:" + failed);
}

// ---------------------------------------------------------------- the runner

struct TestCase {
  const char* name;
  void (*fn)();
  const char* suites = nullptr;  // space-separated suites it runs in, for a program that has suites
};

// What a program adds to the runner.
struct RunOptions {
  // Non-null: the program has suites; the first argument names one, and these are its choices.
  const char* suites = nullptr;
  // Checks every test must leave true (no leaks), run after each test in the test's process.
  void (*after_each)() = nullptr;
};

// The suite chosen on the command line ("" for a program without suites).
inline std::string& selected_suite() {
  static std::string suite;
  return suite;
}

// The time limit of each test, so that a hang fails the test that hangs instead of the whole
// build: 100 s, or NPUGATHER_TEST_LIMIT_SECONDS (for a slow emulator). A test that overruns it
// is named, its children are killed, the summary is printed and the program exits 1; its own
// output not yet flushed is lost. Kept by SIGALRM, not a thread: a thread at every fork upsets
// qemu-user's emulation of the forked child.
inline int test_limit_seconds() {
  const char* s = getenv("NPUGATHER_TEST_LIMIT_SECONDS");
  const int limit = s == nullptr ? 0 : atoi(s);
  return limit > 0 ? limit : 100;
}

// Arguments: [SUITE] [FILTER] [--skip=NAME...]. Runs the tests (of SUITE, for a program with
// suites) whose name contains FILTER and none of the skipped names (an emulator that lacks a
// system call a test needs skips that test); further arguments are the program's own. Prints
// PASS or FAIL with the time of each test, and last "N passed, N failed"; returns the exit code.
template <size_t N>
int run_tests(int argc, char** argv, const TestCase (&tests)[N], const RunOptions& options = {}) {
  signal(SIGPIPE, SIG_IGN);
  std::vector<std::string> positional;
  std::vector<std::string> skipped;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--skip=", 0) == 0) {
      skipped.push_back(arg.substr(7));
    } else {
      positional.push_back(arg);
    }
  }
  if (options.suites != nullptr) {
    if (positional.empty()) {
      fprintf(stderr, "usage: %s %s [FILTER] [--skip=NAME...]\n", argv[0], options.suites);
      return 2;
    }
    selected_suite() = positional.front();
    positional.erase(positional.begin());
  }
  const std::string filter = positional.empty() ? "" : positional.front();
  const std::string label = selected_suite().empty() ? "" : " [" + selected_suite() + "]";
  int passed = 0;
  int failed = 0;
  const int limit_s = test_limit_seconds();
  struct sigaction overrun = {};
  overrun.sa_handler = detail::on_overrun;
  sigaction(SIGALRM, &overrun, nullptr);
  for (const TestCase& t : tests) {
    if (options.suites != nullptr &&
        !contains(std::string(" ") + (t.suites ? t.suites : "") + " ", " " + selected_suite() + " ")) {
      continue;
    }
    if (!contains(t.name, filter)) continue;
    bool skip = false;
    for (const std::string& name : skipped) skip = skip || contains(t.name, name);
    if (skip) continue;
    detail::overrun_message() = std::string("FAIL ") + t.name + label + ": still running after its limit of " +
                                std::to_string(limit_s) + " s (a rank hangs)\n" + std::to_string(passed) + " passed, " +
                                std::to_string(failed + 1) + " failed\n";
    auto t0 = Clock::now();
    alarm(static_cast<unsigned>(limit_s));
    try {
      t.fn();
      if (npg_live_comms() != 0) throw TestFailure(std::to_string(npg_live_comms()) + " communicators left alive");
      if (options.after_each != nullptr) options.after_each();
      ++passed;
      printf("PASS %s%s (%.0f ms)\n", t.name, label.c_str(), ms_since(t0));
    } catch (const std::exception& e) {
      ++failed;
      printf("FAIL %s%s (%.0f ms): %s\n", t.name, label.c_str(), ms_since(t0), e.what());
    }
    alarm(0);
    fflush(stdout);
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace npgtest

#endif  // NPUGATHER_TEST_SUPPORT_TEST_HARNESS_H_
