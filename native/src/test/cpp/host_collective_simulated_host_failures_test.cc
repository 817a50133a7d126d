// Failures on simulated hosts (network namespaces, support/simulated_host_ranks.h): a
// disagreement on counts, a killed rank and a closed communicator reach every rank across and
// within hosts, and nothing is left in /dev/shm. Needs root and `ip`; elsewhere the tests pass
// empty and say why.
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "npugather.h"
#include "support/simulated_host_ranks.h"

namespace {

using namespace npgtest;

void test_mismatched_counts_across_simulated_hosts_give_invalid_usage_on_every_rank() {
  if (simulated_hosts_unavailable()) return;
  simulated::SimulatedHosts net(2);
  const int n = 4;
  const std::string local = cma_between_processes_works() ? "cma" : "staging";
  // Rank 1 shares no host with rank 0 (its ring finds it), rank 2 shares one (its host finds it).
  for (int doubter : {1, 2}) {
    run_on_hosts(net, n, 0, "tcp-hier+" + local, [&](int r, npg_comm_t comm) {
      Layout l = equal_layout(n, 1000);
      if (r == doubter) l.counts[0] = 900;
      std::vector<uint8_t> send(l.counts[r] * 4), recv(l.recv_elems * 4);
      npg_result_t rc =
          npg_all_gather_v(comm, send.data(), l.counts[r], recv.data(), l.counts.data(), l.displs.data(), NPG_FLOAT32);
      CHECK_RC(rc, NPG_INVALID_USAGE);
      CHECK(contains(npg_last_error(), "ranks disagree on receive counts"));
      // The verdict is shared, so the communicator stays usable.
      gather_and_verify(comm, r, n, equal_layout(n, 5000), NPG_FLOAT32, false, false, 3);
    });
  }
}

// A rank killed while its hosts' ranks are inside large gathers: every survivor fails (the
// ranks of its ring and of its host directly, the others through their host's segment)
// well within the deadline, and no shared memory is left behind.
void test_rank_killed_mid_collective_on_simulated_hosts_fails_every_survivor() {
  if (simulated_hosts_unavailable()) return;
  const int64_t timeout = 5000;
  for (int hosts : {2, 3}) {
    for (uint32_t flags : {0u, NPG_FLAG_FORCE_LOG_N}) {
      simulated::SimulatedHosts net(hosts);
      const int n = 2 * hosts;
      const int victim = n - 1;
      ProcShared* shared = map_shared();
      auto pids = fork_ranks(
          n, shared,
          [&](int r, npg_comm_t comm) {
            std::vector<uint8_t> send(4 << 20, static_cast<uint8_t>(r)), recv(send.size() * n);
            shared->started.fetch_add(1);
            for (int i = 0; i < 1000; ++i) {
              auto t0 = Clock::now();
              npg_result_t rc = npg_all_gather(comm, send.data(), recv.data(), send.size(), NPG_UINT8);
              if (rc == NPG_SUCCESS) continue;
              shared->elapsed_ms[r] = ms_since(t0);
              shared->rc[r] = rc;
              snprintf(shared->error[r], sizeof(shared->error[r]), "%s", npg_last_error());
              return (rc == NPG_REMOTE_ERROR || rc == NPG_TIMEOUT) && shared->elapsed_ms[r] < 2 * timeout ? 0 : 1;
            }
            return 2;  // never failed: the kill came too late
          },
          flags, timeout, on_hosts(net));
      auto t0 = Clock::now();
      while (shared->started.load() < n && ms_since(t0) < 30000) usleep(1000);
      usleep(300 * 1000);
      kill(pids[victim], SIGKILL);
      auto codes = wait_children(pids, 60000);
      std::string report = child_report(shared, codes);
      bool named = false;
      for (int r = 0; r < victim; ++r) named = named || contains(shared->error[r], "rank " + std::to_string(victim));
      std::string transport = shared->transport[0];
      munmap(shared, sizeof(ProcShared));
      CHECK(transport.rfind("tcp-hier+", 0) == 0);
      for (int r = 0; r < victim; ++r) {
        if (codes[r] != 0) throw TestFailure("unexpected outcome:" + report);
      }
      if (codes[victim] != -SIGKILL) throw TestFailure("the victim was not killed:" + report);
      if (!named) throw TestFailure("no survivor names rank " + std::to_string(victim) + ":" + report);
      printf("  %d hosts, flags %u:%s\n", hosts, flags, report.c_str());
      expect_no_shm_of(pids);
    }
  }
}

// A rank of a host that closes its communicator after collectives with the others: every
// survivor's next collective fails within a second; its host peer (through the host's
// segment) and its ring peer name it.
void test_a_rank_closing_its_communicator_on_simulated_hosts_fails_every_survivor_at_once() {
  if (simulated_hosts_unavailable()) return;
  simulated::SimulatedHosts net(2);
  const int n = 4;  // host 0: ranks 0, 2; host 1: ranks 1, 3
  const int leaver = 3;
  EagerLimit limit("8192");
  for (uint64_t bytes : {uint64_t{64}, uint64_t{300000}}) {
    ProcShared* shared = map_shared();
    auto pids = fork_ranks(
        n, shared,
        [&](int r, npg_comm_t comm) {
          return leave_or_watch_the_leaver(r, comm, shared, n, leaver, bytes, 3000, 0, nullptr);
        },
        0, kLeaverTimeoutMs, on_hosts(net));
    auto codes = wait_children(pids, 30000);
    std::string report = child_report(shared, codes);
    std::string transport = shared->transport[0];
    bool ok = transport.rfind("tcp-hier+", 0) == 0;
    for (int r = 0; r < n; ++r) {
      ok = ok && codes[r] == 0;
      if (r == leaver) continue;
      ok = ok && shared->rc[r] == NPG_REMOTE_ERROR && shared->elapsed_ms[r] < kLeaverBoundMs;
      // Rank 1 shares its host with the leaver, rank 2 its ring.
      if (r == 1 || r == 2) ok = ok && contains(shared->error[r], "rank 3");
    }
    printf("  %s, %llu bytes: %s\n", transport.c_str(), static_cast<unsigned long long>(bytes), report.c_str());
    munmap(shared, sizeof(ProcShared));
    if (!ok) throw TestFailure(std::to_string(bytes) + " bytes:" + report);
    expect_no_shm_of(pids);
  }
}

const TestCase kTests[] = {
    {"mismatched_counts_across_simulated_hosts_give_invalid_usage_on_every_rank",
     test_mismatched_counts_across_simulated_hosts_give_invalid_usage_on_every_rank},
    {"rank_killed_mid_collective_on_simulated_hosts_fails_every_survivor",
     test_rank_killed_mid_collective_on_simulated_hosts_fails_every_survivor},
    {"a_rank_closing_its_communicator_on_simulated_hosts_fails_every_survivor_at_once",
     test_a_rank_closing_its_communicator_on_simulated_hosts_fails_every_survivor_at_once},
};

}  // namespace

int main(int argc, char** argv) { return run_tests(argc, argv, kTests, host_run_options()); }
