// Failures end every rank promptly and name their cause: a rank that never comes, is killed,
// stopped or aborts, on every transport; the survivors fail within the deadline, and nothing is
// left in /dev/shm. (A rank that closes its communicator: host_collective_closed_communicator_test.)
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "npugather.h"
#include "support/host_test_support.h"

namespace {

using namespace npgtest;

void test_rank_that_never_calls_gather_makes_others_time_out() {
  const int n = 3;
  const int64_t timeout = 400;
  auto info = make_root_info();
  std::atomic<int> finished{0};
  run_ranks(n, [&](int rank) {
    npg_comm_t comm = init_rank(rank, n, info, 0, timeout);
    if (rank == 2) {
      while (finished.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    } else {
      std::vector<uint8_t> send(64), recv(64 * n);
      auto t0 = Clock::now();
      npg_result_t rc = npg_all_gather(comm, send.data(), recv.data(), 64, NPG_UINT8);
      double ms = ms_since(t0);
      finished.fetch_add(1);
      CHECK_RC(rc, NPG_TIMEOUT);
      CHECK(contains(npg_last_error(), "rank 2"));
      CHECK(ms < 2 * timeout);
      // A communicator that timed out refuses further work instead of hanging.
      CHECK_RC(npg_all_gather(comm, send.data(), recv.data(), 64, NPG_UINT8), NPG_INVALID_USAGE);
    }
    CHECK_OK(npg_comm_destroy(comm));
  });
}

void test_rank_that_never_joins_makes_init_time_out() {
  const int64_t timeout = 400;
  auto info = make_root_info();
  run_ranks(2, [&](int rank) {  // rank 2 of 3 never calls npg_comm_init
    npg_comm_t comm = nullptr;
    auto t0 = Clock::now();
    npg_result_t rc =
        npg_comm_init("host", rank, 3, 0, "", 0, -1, nullptr, timeout, 0, info.data(), info.size(), &comm);
    double ms = ms_since(t0);
    CHECK_RC(rc, NPG_TIMEOUT);
    CHECK(comm == nullptr);
    CHECK(contains(npg_last_error(), "rank 2"));
    CHECK(ms < 2 * timeout + 600);
  });
}

void expect_killed_rank_fails_survivors(uint32_t flags) {
  const int n = 3;
  const int64_t timeout = 3000;
  ProcShared* shared = map_shared();
  auto pids = fork_ranks(
      n, shared,
      [&](int r, npg_comm_t comm) {
        if (r == 2) {
          for (;;) pause();  // killed before it posts
        }
        while (shared->inited.load() < n) usleep(1000);
        std::vector<uint8_t> send(1 << 20), recv((1 << 20) * n);
        auto t0 = Clock::now();
        npg_result_t rc = npg_all_gather(comm, send.data(), recv.data(), send.size(), NPG_UINT8);
        shared->elapsed_ms[r] = ms_since(t0);
        shared->rc[r] = rc;
        snprintf(shared->error[r], sizeof(shared->error[r]), "%s", npg_last_error());
        return (rc == NPG_REMOTE_ERROR || rc == NPG_TIMEOUT) && shared->elapsed_ms[r] < 2 * timeout ? 0 : 1;
      },
      flags, timeout);
  auto t0 = Clock::now();
  while (shared->inited.load() < n && ms_since(t0) < 20000) usleep(1000);
  usleep(200 * 1000);
  kill(pids[2], SIGKILL);
  auto codes = wait_children(pids, 20000);
  std::string report = child_report(shared, codes);
  int root_pid = shared->root_pid;
  std::string survivor_error = shared->error[0];
  // Over shared memory everyone watches rank 2; on the ring only its right neighbour does.
  bool named = contains(shared->error[0], "rank 2") && (flags != 0 || contains(shared->error[1], "rank 2"));
  munmap(shared, sizeof(ProcShared));
  if (codes[0] != 0 || codes[1] != 0 || codes[2] != -SIGKILL) throw TestFailure("unexpected outcome:" + report);
  if (!named) throw TestFailure("survivors do not name rank 2:" + report);
  printf("  survivor error: %s\n", survivor_error.c_str());
  CHECK(shm_entries("npugather." + std::to_string(root_pid) + ".").empty());
}

void test_killed_process_rank_fails_survivors_promptly_and_leaves_no_shm() {
  expect_killed_rank_fails_survivors(0);
  expect_killed_rank_fails_survivors(NPG_FLAG_FORCE_TCP);
  expect_killed_rank_fails_survivors(NPG_FLAG_FORCE_TCP | NPG_FLAG_FORCE_LOG_N);
}

// peer_may_complete: the aborted rank's block had already left in full, so the late peer may
// also finish its gather — with every byte right — instead of failing (the TCP transports send
// a block with its header in one sendmsg, so the peer's send does not meet the reset before
// it has read the block).
void expect_abort_ends_blocked_gather(uint32_t flags, bool peer_may_complete = false) {
  auto info = make_root_info();
  std::atomic<int> aborted{0};
  run_ranks(2, [&](int rank) {
    npg_comm_t comm = init_rank(rank, 2, info, flags, 20000);
    std::vector<uint8_t> send(4096, static_cast<uint8_t>(rank + 1)), recv(8192);
    if (rank == 0) {
      std::thread aborter([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        npg_comm_abort(comm);
      });
      auto t0 = Clock::now();
      npg_result_t rc = npg_all_gather(comm, send.data(), recv.data(), send.size(), NPG_UINT8);
      double ms = ms_since(t0);
      aborter.join();
      aborted.store(1);
      CHECK_RC(rc, NPG_ABORTED);
      CHECK(ms < 200 + 300);
      CHECK_RC(npg_all_gather(comm, send.data(), recv.data(), send.size(), NPG_UINT8), NPG_ABORTED);
    } else {
      while (aborted.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      auto t0 = Clock::now();
      npg_result_t rc = npg_all_gather(comm, send.data(), recv.data(), send.size(), NPG_UINT8);
      if (peer_may_complete && rc == NPG_SUCCESS) {
        for (size_t i = 0; i < recv.size(); ++i) CHECK(recv[i] == (i < 4096 ? 1 : 2));
      } else {
        CHECK_RC(rc, NPG_REMOTE_ERROR);  // the peer learns about the abort, no timeout needed
      }
      CHECK(ms_since(t0) < 1000);
    }
    CHECK_OK(npg_comm_destroy(comm));
  });
}

void test_abort_from_another_thread_ends_a_blocked_gather_promptly() {
  expect_abort_ends_blocked_gather(0);
  expect_abort_ends_blocked_gather(NPG_FLAG_FORCE_TCP, true);
  expect_abort_ends_blocked_gather(NPG_FLAG_FORCE_TCP | NPG_FLAG_FORCE_LOG_N, true);
}

void test_an_abort_is_named_as_the_abort_on_every_other_rank() {
  // Rank 1 aborts while ranks 0 and 2 wait for it; rank 2 may see rank 0's failure before
  // rank 1's abort, and must still name the abort.
  for (uint32_t flags : {0u, NPG_FLAG_FORCE_STAGING}) {
    const int n = 3;
    const int64_t timeout = 30000;
    ProcShared* shared = map_shared();
    auto pids = fork_ranks(
        n, shared,
        [&](int r, npg_comm_t comm) {
          while (shared->inited.load() < n) usleep(1000);
          if (r == 1) {
            usleep(200 * 1000);
            return npg_comm_abort(comm) == NPG_SUCCESS ? 0 : 1;
          }
          std::vector<uint8_t> send(4096), recv(4096 * n);
          auto t0 = Clock::now();
          shared->rc[r] = npg_all_gather(comm, send.data(), recv.data(), send.size(), NPG_UINT8);
          shared->elapsed_ms[r] = ms_since(t0);
          snprintf(shared->error[r], sizeof(shared->error[r]), "%s", npg_last_error());
          return 0;
        },
        flags, timeout);
    auto codes = wait_children(pids, 2.0 * timeout);
    std::string report = child_report(shared, codes);
    bool ok = true;
    for (int r : {0, 2}) {
      ok = ok && shared->rc[r] == NPG_REMOTE_ERROR && shared->elapsed_ms[r] < timeout / 3 &&
           without_context(shared->error[r]) == "rank 1 aborted its communicator";
    }
    munmap(shared, sizeof(ProcShared));
    if (codes[0] != 0 || codes[1] != 0 || codes[2] != 0 || !ok)
      throw TestFailure("flags " + std::to_string(flags) + ":" + report);
  }
}

void test_a_stalled_rank_on_the_ring_is_named_by_the_ranks_after_it() {
  // Rank 1 never enters the gather: rank 2 waits for it directly, rank 0 for its block
  // through rank 2, and both name rank 1.
  const int n = 3;
  const int64_t timeout = 500;
  auto info = make_root_info();
  std::atomic<int> finished{0};
  std::mutex mutex;
  std::vector<std::string> errors(n);
  run_ranks(n, [&](int rank) {
    npg_comm_t comm = init_rank(rank, n, info, NPG_FLAG_FORCE_TCP, timeout);
    if (rank == 1) {
      while (finished.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    } else {
      std::vector<uint8_t> send(64), recv(64 * n);
      npg_result_t rc = npg_all_gather(comm, send.data(), recv.data(), 64, NPG_UINT8);
      {
        std::lock_guard<std::mutex> lock(mutex);
        errors[rank] = npg_last_error();
      }
      finished.fetch_add(1);
      // Rank 0 times out too, or first sees rank 2 close the ring after its own timeout.
      CHECK(rc == NPG_TIMEOUT || (rank == 0 && rc == NPG_REMOTE_ERROR));
    }
    CHECK_OK(npg_comm_destroy(comm));
  });
  CHECK(contains(errors[0], "rank 1's block") && contains(errors[0], "comes through rank 2"));
  CHECK(contains(errors[2], "still waiting for rank 1's block"));
  CHECK(!contains(errors[2], "comes through"));
}

// The rank a ring rank's error blames for the stall, parsed from its text; -1 if none.
int blamed_on_the_ring(const std::string& error) {
  // In order: a neighbour's verdict passed on, a rank that did not pass a block on, the rank a
  // neighbour waits for, a right neighbour that stopped reading, the origin of the block missing.
  for (const char* pattern :
       {"timed out waiting for rank %d%n", "which rank %d has not passed on%n", "waits for rank %d)%n",
        "rank %d has not taken the rest%n", "still waiting for rank %d's block%n"}) {
    const std::string head(pattern, strstr(pattern, "%d"));
    for (size_t at = error.find(head); at != std::string::npos; at = error.find(head, at + 1)) {
      int rank = -1;
      int end = 0;  // set only when the whole pattern matched
      if (sscanf(error.c_str() + at, pattern, &rank, &end) == 1 && end > 0) return rank;
    }
  }
  return -1;
}

// One rank of a TCP ring is stopped (SIGSTOP: alive, holding its connections, not moving) while
// every rank loops over gathers: every other rank fails by its deadline naming the stopped rank,
// not a neighbour that merely waits too or that closed the ring after giving up, whichever
// collective and whichever part of a block each was in.
void test_a_stopped_rank_on_the_ring_is_named_by_every_other_rank() {
  const int64_t timeout = 1500;
  struct Case {
    int n;
    int victim;
    uint64_t bytes;
    int stop_after_ms;
  };
  const Case cases[] = {
      {3, 0, 64, 20}, {3, 2, 1 << 20, 60}, {3, 1, 100000, 110}, {4, 1, 64, 150}, {4, 3, 256 << 10, 90}};
  for (const Case& c : cases) {
    ProcShared* shared = map_shared();
    auto pids = fork_ranks(
        c.n, shared,
        [&](int r, npg_comm_t comm) {
          std::vector<uint8_t> send(c.bytes, static_cast<uint8_t>(r)), recv(c.bytes * c.n);
          shared->started.fetch_add(1);
          for (;;) {
            auto t0 = Clock::now();
            npg_result_t rc = npg_all_gather(comm, send.data(), recv.data(), c.bytes, NPG_UINT8);
            if (rc == NPG_SUCCESS) continue;
            shared->elapsed_ms[r] = ms_since(t0);
            shared->rc[r] = rc;
            snprintf(shared->error[r], sizeof(shared->error[r]), "%s", npg_last_error());
            return 0;
          }
        },
        NPG_FLAG_FORCE_TCP | NPG_FLAG_FORCE_RING, timeout);
    auto t0 = Clock::now();
    while (shared->started.load() < c.n && ms_since(t0) < 20000) usleep(1000);
    usleep(c.stop_after_ms * 1000);
    kill(pids[c.victim], SIGSTOP);
    std::vector<pid_t> survivors;
    for (int r = 0; r < c.n; ++r)
      if (r != c.victim) survivors.push_back(pids[r]);
    auto codes = wait_children(survivors, 4 * timeout + 5000);
    kill(pids[c.victim], SIGKILL);
    waitpid(pids[c.victim], nullptr, 0);
    std::string problems;
    std::string report;
    for (int r = 0, i = 0; r < c.n; ++r) {
      if (r == c.victim) continue;
      const int code = codes[i++];
      const std::string error = shared->error[r];
      report += "\n    rank " + std::to_string(r) + ": " + npg_result_name(static_cast<npg_result_t>(shared->rc[r])) +
                " after " + std::to_string(static_cast<int>(shared->elapsed_ms[r])) + " ms: " + error;
      const bool in_time = shared->elapsed_ms[r] < timeout + 1000;
      if (code != 0 || shared->rc[r] != NPG_TIMEOUT || !in_time || blamed_on_the_ring(error) != c.victim) {
        problems += " rank " + std::to_string(r);
      }
    }
    printf("  %d ranks, rank %d stopped, %llu bytes:%s\n", c.n, c.victim, static_cast<unsigned long long>(c.bytes),
           report.c_str());
    munmap(shared, sizeof(ProcShared));
    if (!problems.empty()) {
      throw TestFailure(std::to_string(c.n) + " ranks, rank " + std::to_string(c.victim) +
                        " stopped: not named within the deadline by" + problems + report);
    }
  }
}

// One rank's eager gathers until one fails: every successful one is checked byte for byte.
// Returns the failing call's code (NPG_SUCCESS if none failed within limit_ms).
npg_result_t eager_gathers_until_failure(npg_comm_t comm, int rank, int n, double limit_ms, std::string* error) {
  const uint64_t len = 4096 + 8 * static_cast<uint64_t>(rank);  // ragged, every block eager
  Layout l;
  for (int r = 0; r < n; ++r) {
    l.displs.push_back(l.recv_elems);
    l.counts.push_back(4096 + 8 * static_cast<uint64_t>(r));
    l.recv_elems += l.counts.back();
  }
  std::vector<uint8_t> send(len), recv(l.recv_elems), expect;
  auto t0 = Clock::now();
  for (uint64_t seed = 1; ms_since(t0) < limit_ms; ++seed) {
    fill_pattern(send.data(), len, seed, rank);
    npg_result_t rc =
        npg_all_gather_v(comm, send.data(), len, recv.data(), l.counts.data(), l.displs.data(), NPG_UINT8);
    if (rc != NPG_SUCCESS) {
      *error = npg_last_error();
      return rc;
    }
    for (int r = 0; r < n; ++r) {
      expect.assign(l.counts[r], 0);
      fill_pattern(expect.data(), l.counts[r], seed, r);
      if (memcmp(recv.data() + l.displs[r], expect.data(), l.counts[r]) != 0) {
        throw TestFailure("eager gather " + std::to_string(seed) + ": block of rank " + std::to_string(r) + " differs");
      }
    }
  }
  return NPG_SUCCESS;
}

// A rank killed while every rank loops over eager gathers: the survivors fail well before
// the deadline and name it, whatever phase the kill caught them in, and no shm is left.
void test_rank_killed_during_eager_gathers_fails_every_survivor() {
  const int n = 3;
  const int64_t timeout = 5000;
  EagerLimit limit("32768");
  for (uint32_t flags : {0u, NPG_FLAG_FORCE_STAGING}) {
    ProcShared* shared = map_shared();
    auto pids = fork_ranks(
        n, shared,
        [&](int r, npg_comm_t comm) {
          shared->started.fetch_add(1);
          std::string error;
          auto t0 = Clock::now();
          npg_result_t rc = eager_gathers_until_failure(comm, r, n, 30000, &error);
          shared->elapsed_ms[r] = ms_since(t0);
          shared->rc[r] = rc;
          snprintf(shared->error[r], sizeof(shared->error[r]), "%s", error.c_str());
          return rc == NPG_REMOTE_ERROR ? 0 : 1;
        },
        flags, timeout);
    auto t0 = Clock::now();
    while (shared->started.load() < n && ms_since(t0) < 30000) usleep(1000);
    usleep(200 * 1000);
    kill(pids[n - 1], SIGKILL);
    auto codes = wait_children(pids, 60000);
    std::string report = child_report(shared, codes);
    bool named = contains(shared->error[0], "rank 2") && contains(shared->error[1], "rank 2");
    int root_pid = shared->root_pid;
    munmap(shared, sizeof(ProcShared));
    if (codes[0] != 0 || codes[1] != 0 || codes[2] != -SIGKILL) throw TestFailure("unexpected outcome:" + report);
    if (!named) throw TestFailure("survivors do not name rank 2:" + report);
    CHECK(shm_entries("npugather." + std::to_string(root_pid) + ".").empty());
  }
}

// An abort while ranks loop over eager gathers ends every rank: the aborting rank with
// ABORTED, its peers with REMOTE_ERROR naming the abort; none waits for the deadline.
void test_abort_during_eager_gathers_ends_every_rank() {
  const int n = 3;
  EagerLimit limit("32768");
  auto info = make_root_info();
  std::vector<npg_result_t> codes(n, NPG_SUCCESS);
  std::vector<std::string> errors(n);
  run_ranks(n, [&](int rank) {
    npg_comm_t comm = init_rank(rank, n, info, 0, 20000);
    std::thread aborter;
    if (rank == 0) {
      aborter = std::thread([comm] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        npg_comm_abort(comm);
      });
    }
    codes[rank] = eager_gathers_until_failure(comm, rank, n, 15000, &errors[rank]);
    if (aborter.joinable()) aborter.join();
    CHECK_OK(npg_comm_destroy(comm));
  });
  CHECK(codes[0] == NPG_ABORTED);
  for (int r = 1; r < n; ++r) {
    if (codes[r] != NPG_REMOTE_ERROR || !contains(errors[r], "rank 0 aborted")) {
      throw TestFailure("rank " + std::to_string(r) + " returned " + npg_result_name(codes[r]) + ": " + errors[r]);
    }
  }
}

const TestCase kTests[] = {
    {"rank_that_never_calls_gather_makes_others_time_out", test_rank_that_never_calls_gather_makes_others_time_out},
    {"rank_that_never_joins_makes_init_time_out", test_rank_that_never_joins_makes_init_time_out},
    {"killed_process_rank_fails_survivors_promptly_and_leaves_no_shm",
     test_killed_process_rank_fails_survivors_promptly_and_leaves_no_shm},
    {"abort_from_another_thread_ends_a_blocked_gather_promptly",
     test_abort_from_another_thread_ends_a_blocked_gather_promptly},
    {"an_abort_is_named_as_the_abort_on_every_other_rank", test_an_abort_is_named_as_the_abort_on_every_other_rank},
    {"a_stalled_rank_on_the_ring_is_named_by_the_ranks_after_it",
     test_a_stalled_rank_on_the_ring_is_named_by_the_ranks_after_it},
    {"a_stopped_rank_on_the_ring_is_named_by_every_other_rank",
     test_a_stopped_rank_on_the_ring_is_named_by_every_other_rank},
    {"rank_killed_during_eager_gathers_fails_every_survivor",
     test_rank_killed_during_eager_gathers_fails_every_survivor},
    {"abort_during_eager_gathers_ends_every_rank", test_abort_during_eager_gathers_ends_every_rank},
};

}  // namespace

int main(int argc, char** argv) { return run_tests(argc, argv, kTests, host_run_options()); }
