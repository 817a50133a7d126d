// A rank that closes its communicator (npg_comm_destroy, no abort) while its process lives,
// on every transport, ranks as threads and as processes: its peers' next collective fails at
// once, naming it.
#include <stdio.h>
#include <sys/mman.h>
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

// A rank that closes its communicator (npg_comm_destroy, no abort) while its process lives:
// the collectives it took part in succeed on every rank, even when it closes while its
// peers still finish the last one, and the peers' next collective fails within a second
// (the deadline is 3 s) with REMOTE_ERROR naming it, whether they already wait when it
// closes (close_after_ms > 0) or only enter afterwards.

// Checks a peer's outcome after `leaver` closed its communicator; "" when it is right.
std::string peer_after_leaver(int rank, npg_result_t rc, double ms, const std::string& error, int leaver,
                              const std::string& expected_text) {
  if (rc == NPG_REMOTE_ERROR && ms < kLeaverBoundMs && contains(error, expected_text)) return "";
  return "rank " + std::to_string(rank) + " returned " + npg_result_name(rc) + " after " +
         std::to_string(static_cast<int>(ms)) + " ms: '" + error + "' (expected REMOTE_ERROR within " +
         std::to_string(static_cast<int>(kLeaverBoundMs)) + " ms naming rank " + std::to_string(leaver) + ")";
}

std::string closed_text(int leaver) { return "rank " + std::to_string(leaver) + " closed its communicator"; }

void expect_leaving_thread_fails_peers(uint32_t flags, const char* transport, uint64_t bytes, int close_after_ms) {
  const int n = 3;
  const int leaver = 1;
  auto info = make_root_info();
  std::mutex mutex;
  std::vector<std::string> problems;
  std::vector<int64_t> ended(n, 0);
  std::atomic<int64_t> closed_at{0};
  run_ranks(n, [&](int rank) {
    npg_comm_t comm = init_rank(rank, n, info, flags, kLeaverTimeoutMs);
    CHECK(std::string(npg_comm_transport(comm)) == transport);
    for (int i = 0; i < kRunsBeforeLeaving; ++i) {
      gather_and_verify(comm, rank, n, equal_layout(n, bytes), NPG_UINT8, false, false, 1000 + i);
    }
    if (rank == leaver) {
      std::this_thread::sleep_for(std::chrono::milliseconds(close_after_ms));
      closed_at.store(now_ns());
      CHECK_OK(npg_comm_destroy(comm));
      return;
    }
    std::vector<uint8_t> send(bytes), recv(bytes * n);
    auto t0 = Clock::now();
    npg_result_t rc = npg_all_gather(comm, send.data(), recv.data(), bytes, NPG_UINT8);
    const double ms = ms_since(t0);
    const int64_t end = now_ns();
    std::string problem = peer_after_leaver(rank, rc, ms, npg_last_error(), leaver, closed_text(leaver));
    CHECK_OK(npg_comm_destroy(comm));
    std::lock_guard<std::mutex> lock(mutex);
    ended[rank] = end;
    if (!problem.empty()) problems.push_back(problem);
  });
  printf("  %s, %llu bytes, closing after %d ms: the peers failed %.1f and %.1f ms after the close\n", transport,
         static_cast<unsigned long long>(bytes), close_after_ms, (ended[0] - closed_at.load()) / 1e6,
         (ended[2] - closed_at.load()) / 1e6);
  if (!problems.empty()) {
    throw TestFailure(std::string(transport) + ", " + std::to_string(bytes) + " bytes, closing after " +
                      std::to_string(close_after_ms) + " ms: " + problems[0]);
  }
}

void expect_leaving_process_fails_peers(uint32_t flags, uint64_t bytes, int close_after_ms) {
  const int n = 3;
  const int leaver = 1;
  ProcShared* shared = map_shared();
  // When each peer's call ended (steady clock), in memory the children share with this process.
  auto* ended = static_cast<int64_t*>(
      mmap(nullptr, n * sizeof(int64_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (ended == MAP_FAILED) throw TestFailure("mmap failed");
  auto pids = fork_ranks(
      n, shared,
      [&](int r, npg_comm_t comm) {
        return leave_or_watch_the_leaver(r, comm, shared, n, leaver, bytes, 2000, close_after_ms, ended);
      },
      flags, kLeaverTimeoutMs);
  auto codes = wait_children(pids, 30000);
  std::string report = child_report(shared, codes);
  std::string transport = shared->transport[0];
  std::string problem;
  for (int r = 0; r < n && problem.empty(); ++r) {
    if (codes[r] != 0) problem = "rank " + std::to_string(r) + " exited with " + std::to_string(codes[r]);
    if (r != leaver && problem.empty()) {
      problem = peer_after_leaver(r, static_cast<npg_result_t>(shared->rc[r]), shared->elapsed_ms[r], shared->error[r],
                                  leaver, closed_text(leaver));
    }
  }
  int root_pid = shared->root_pid;
  printf("  %s (processes), %llu bytes, closing after %d ms: the peers failed %.1f and %.1f ms after the close\n",
         transport.c_str(), static_cast<unsigned long long>(bytes), close_after_ms,
         (ended[0] - shared->mark_ns.load()) / 1e6, (ended[2] - shared->mark_ns.load()) / 1e6);
  munmap(ended, n * sizeof(int64_t));
  munmap(shared, sizeof(ProcShared));
  if (!problem.empty()) {
    throw TestFailure(transport + ", " + std::to_string(bytes) + " bytes, closing after " +
                      std::to_string(close_after_ms) + " ms: " + problem + ";" + report);
  }
  CHECK(shm_entries("npugather." + std::to_string(root_pid) + ".").empty());
}

void test_a_rank_closing_its_communicator_fails_its_peers_at_once_on_every_transport() {
  // Eager (64 bytes) and direct (300000 bytes, with a done round) collectives.
  EagerLimit limit("8192");
  for (uint64_t bytes : {uint64_t{64}, uint64_t{300000}}) {
    for (int close_after_ms : {0, 200}) {
      expect_leaving_thread_fails_peers(0, "threads", bytes, close_after_ms);
      expect_leaving_thread_fails_peers(NPG_FLAG_FORCE_STAGING, "staging", bytes, close_after_ms);
      expect_leaving_thread_fails_peers(NPG_FLAG_FORCE_TCP, "tcp", bytes, close_after_ms);
      expect_leaving_thread_fails_peers(NPG_FLAG_FORCE_TCP | NPG_FLAG_FORCE_LOG_N, "tcp-log-n", bytes, close_after_ms);
      expect_leaving_process_fails_peers(0, bytes, close_after_ms);
      expect_leaving_process_fails_peers(NPG_FLAG_FORCE_STAGING, bytes, close_after_ms);
    }
  }
}

const TestCase kTests[] = {
    {"a_rank_closing_its_communicator_fails_its_peers_at_once_on_every_transport",
     test_a_rank_closing_its_communicator_fails_its_peers_at_once_on_every_transport},
};

}  // namespace

int main(int argc, char** argv) { return run_tests(argc, argv, kTests, host_run_options()); }
