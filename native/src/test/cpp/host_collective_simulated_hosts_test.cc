// Ranks on simulated hosts (network namespaces, simulated_hosts.h): the hierarchical transport
// gathers every byte, unequal hosts keep the flat ring, and a disagreement, a killed rank or a
// closed communicator reaches every rank. Needs root and `ip`; elsewhere the tests pass empty
// and say why.
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "npugather.h"
#include "simulated_hosts.h"
#include "support/host_test_support.h"

namespace {

using namespace npgtest;

// Whether one process can read another's memory, as init's cross-memory-attach probe does:
// Yama may forbid it, and an emulator (qemu-user) may not translate the addresses.
bool cma_between_processes_works() {
  static volatile uint64_t canary = 0x5eed5eed5eed5eedull;
  const pid_t parent = getpid();
  const pid_t pid = fork_child([parent] {
    uint64_t got = 0;
    iovec local{&got, sizeof(got)};
    iovec remote{const_cast<uint64_t*>(&canary), sizeof(got)};
    return process_vm_readv(parent, &local, 1, &remote, 1, 0) == sizeof(got) && got == canary ? 0 : 1;
  });
  return wait_children({pid}, 10000)[0] == 0;
}

// True (after saying why) when this machine cannot simulate hosts: such tests then pass empty.
bool simulated_hosts_unavailable() {
  std::string reason = simulated::SimulatedHosts::unavailable_reason();
  if (!reason.empty()) printf("  (skipped: %s)\n", reason.c_str());
  return !reason.empty();
}

// Rank r runs on host r % hosts, so the ranks of one host are not consecutive.
Placement on_hosts(const simulated::SimulatedHosts& net) {
  return [&net](int r) {
    net.enter(r % net.hosts());
    return net.address(0);
  };
}

// No control segment of any rank (each host's lowest rank creates one) is left behind.
void expect_no_shm_of(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) {
    if (!shm_entries("npugather." + std::to_string(pid) + ".").empty()) {
      throw TestFailure("shared memory of pid " + std::to_string(pid) + " left in /dev/shm");
    }
  }
}

// n ranks on `hosts` simulated hosts run body; every rank must pass and report `transport`.
void run_on_hosts(const simulated::SimulatedHosts& net, int n, uint32_t flags, const std::string& transport,
                  const std::function<void(int, npg_comm_t)>& body) {
  const ProcessRanks ranks = run_process_ranks(n, body, flags, 20000, 120000, on_hosts(net));
  const std::vector<std::string>& transports = ranks.transports;
  for (int r = 0; r < n; ++r) {
    if (transports[r] != transport) {
      throw TestFailure("rank " + std::to_string(r) + " ran '" + transports[r] + "', expected '" + transport + "'");
    }
  }
  expect_no_shm_of(ranks.pids);
}

void test_ranks_on_2_and_3_simulated_hosts_gather_every_byte_hierarchically() {
  if (simulated_hosts_unavailable()) return;
  const std::string local = cma_between_processes_works() ? "cma" : "staging";
  for (int hosts : {2, 3}) {
    simulated::SimulatedHosts net(hosts);
    const int n = 2 * hosts;
    // (1 MiB + 13) bytes are not a multiple of the ring's 1 MiB socket chunk; some blocks are empty.
    const Layout ragged = ragged_layout(n, (1 << 20) + 13, 60 + n);
    const Layout equal = equal_layout(n, 300001);
    // The hierarchy is the default (its rings across hosts forced to log-N too); NPG_FLAG_FORCE_TCP
    // keeps the flat ring.
    const std::vector<std::pair<uint32_t, std::string>> cases = {{0u, "tcp-hier+" + local},
                                                                 {NPG_FLAG_FORCE_LOG_N, "tcp-hier+" + local},
                                                                 {NPG_FLAG_FORCE_STAGING, "tcp-hier+staging"},
                                                                 {NPG_FLAG_FORCE_TCP, "tcp"}};
    for (const auto& c : cases) {
      run_on_hosts(net, n, c.first, c.second, [&](int r, npg_comm_t comm) {
        for (int it = 0; it < 2; ++it) {
          gather_and_verify(comm, r, n, ragged, NPG_INT8, it == 1, true, 700 + it);
          gather_and_verify(comm, r, n, equal, NPG_FLOAT32, false, false, 710 + it);
          // 12 segments: more than a control-segment slot carries inline.
          gather_segments_and_verify(comm, r, n, ragged, 720 + it, 12);
        }
      });
    }
  }
}

// Each host is one process with its 2 ranks as threads (ranks h and h+2 on host h).
void test_rank_threads_on_2_simulated_hosts_gather_every_byte_hierarchically() {
  if (simulated_hosts_unavailable()) return;
  simulated::SimulatedHosts net(2);
  const int n = 4;
  const Layout ragged = ragged_layout(n, (1 << 20) + 13, 91);
  for (const auto& c : std::vector<std::pair<uint32_t, std::string>>{{0u, "tcp-hier+threads"},
                                                                     {NPG_FLAG_FORCE_STAGING, "tcp-hier+staging"}}) {
    ProcShared* shared = map_shared();
    std::vector<pid_t> pids;
    for (int h = 0; h < 2; ++h) {
      pids.push_back(fork_child([&, h] {
        int code = 0;
        try {
          net.enter(h);
          if (h == 0) {
            size_t size = 0;
            CHECK_OK(npg_get_root_info("host", net.address(0).c_str(), shared->info, sizeof(shared->info), &size));
            shared->info_size = size;
            shared->info_ready.store(1);
          }
          auto t0 = Clock::now();
          while (shared->info_ready.load() == 0 && ms_since(t0) < 10000) usleep(1000);
          CHECK(shared->info_ready.load() == 1);
          const std::vector<uint8_t> info(shared->info, shared->info + shared->info_size);
          run_ranks(2, [&](int i) {
            const int r = h + 2 * i;
            npg_comm_t comm = init_rank(r, n, info, c.first);
            snprintf(shared->transport[r], sizeof(shared->transport[r]), "%s", npg_comm_transport(comm));
            for (int it = 0; it < 2; ++it) {
              gather_and_verify(comm, r, n, ragged, NPG_INT8, it == 1, true, 900 + it);
              gather_segments_and_verify(comm, r, n, ragged, 910 + it, 12);
            }
            CHECK_OK(npg_comm_destroy(comm));
          });
        } catch (const std::exception& e) {
          snprintf(shared->error[h], sizeof(shared->error[h]), "%s", e.what());
          code = 1;
        }
        return code;
      }));
    }
    auto codes = wait_children(pids, 120000);
    std::string report = child_report(shared, codes);
    std::vector<std::string> transports;
    for (int r = 0; r < n; ++r) transports.push_back(shared->transport[r]);
    munmap(shared, sizeof(ProcShared));
    for (int code : codes)
      if (code != 0) throw TestFailure("host processes failed:" + report);
    for (int r = 0; r < n; ++r) {
      if (transports[r] != c.second) throw TestFailure("rank " + std::to_string(r) + " ran '" + transports[r] + "'");
    }
    expect_no_shm_of(pids);
  }
}

void test_unequal_ranks_per_simulated_host_keep_the_flat_ring() {
  if (simulated_hosts_unavailable()) return;
  simulated::SimulatedHosts net(2);
  const int n = 3;  // ranks 0 and 2 on host 0, rank 1 on host 1
  const Layout l = ragged_layout(n, 200000, 81);
  run_on_hosts(net, n, 0, "tcp",
               [&](int r, npg_comm_t comm) { gather_and_verify(comm, r, n, l, NPG_UINT8, false, true, 800); });
}

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
          for (int i = 0; i < kRunsBeforeLeaving; ++i) {
            gather_and_verify(comm, r, n, equal_layout(n, bytes), NPG_UINT8, false, false, 3000 + i);
          }
          if (r == leaver) {
            if (npg_comm_destroy(comm) != NPG_SUCCESS) return 2;
            auto t0 = Clock::now();
            while (shared->started.load() < n - 1 && ms_since(t0) < 10000) usleep(1000);
            return 0;
          }
          std::vector<uint8_t> send(bytes), recv(bytes * n);
          auto t0 = Clock::now();
          shared->rc[r] = npg_all_gather(comm, send.data(), recv.data(), bytes, NPG_UINT8);
          shared->elapsed_ms[r] = ms_since(t0);
          snprintf(shared->error[r], sizeof(shared->error[r]), "%s", npg_last_error());
          shared->started.fetch_add(1);
          return 0;
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
    {"ranks_on_2_and_3_simulated_hosts_gather_every_byte_hierarchically",
     test_ranks_on_2_and_3_simulated_hosts_gather_every_byte_hierarchically},
    {"rank_threads_on_2_simulated_hosts_gather_every_byte_hierarchically",
     test_rank_threads_on_2_simulated_hosts_gather_every_byte_hierarchically},
    {"unequal_ranks_per_simulated_host_keep_the_flat_ring", test_unequal_ranks_per_simulated_host_keep_the_flat_ring},
    {"mismatched_counts_across_simulated_hosts_give_invalid_usage_on_every_rank",
     test_mismatched_counts_across_simulated_hosts_give_invalid_usage_on_every_rank},
    {"rank_killed_mid_collective_on_simulated_hosts_fails_every_survivor",
     test_rank_killed_mid_collective_on_simulated_hosts_fails_every_survivor},
    {"a_rank_closing_its_communicator_on_simulated_hosts_fails_every_survivor_at_once",
     test_a_rank_closing_its_communicator_on_simulated_hosts_fails_every_survivor_at_once},
};

}  // namespace

int main(int argc, char** argv) { return run_tests(argc, argv, kTests, host_run_options()); }
