// Ranks of the host backend on simulated hosts (simulated_hosts.h: network namespaces): where
// they run, what they leave behind, and whether this machine can simulate hosts at all.
#ifndef NPUGATHER_TEST_SUPPORT_SIMULATED_HOST_RANKS_H_
#define NPUGATHER_TEST_SUPPORT_SIMULATED_HOST_RANKS_H_

#include <stdio.h>
#include <sys/uio.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "../simulated_hosts.h"
#include "host_test_support.h"

namespace npgtest {

// Whether one process can read another's memory, as init's cross-memory-attach probe does:
// Yama may forbid it, and an emulator (qemu-user) may not translate the addresses.
inline bool cma_between_processes_works() {
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
inline bool simulated_hosts_unavailable() {
  std::string reason = simulated::SimulatedHosts::unavailable_reason();
  if (!reason.empty()) printf("  (skipped: %s)\n", reason.c_str());
  return !reason.empty();
}

// Rank r runs on host r % hosts, so the ranks of one host are not consecutive.
inline Placement on_hosts(const simulated::SimulatedHosts& net) {
  return [&net](int r) {
    net.enter(r % net.hosts());
    return net.address(0);
  };
}

// No control segment of any rank (each host's lowest rank creates one) is left behind.
inline void expect_no_shm_of(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) {
    if (!shm_entries("npugather." + std::to_string(pid) + ".").empty()) {
      throw TestFailure("shared memory of pid " + std::to_string(pid) + " left in /dev/shm");
    }
  }
}

// n ranks on `hosts` simulated hosts run body; every rank must pass and report `transport`.
inline void run_on_hosts(const simulated::SimulatedHosts& net, int n, uint32_t flags, const std::string& transport,
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

// Two process ranks on each of `hosts` simulated hosts gather every byte on every transport the
// hierarchy offers (and the flat ring): ragged, equal, in place and from segments.
inline void expect_hierarchical_gathers_on_hosts(int hosts) {
  if (simulated_hosts_unavailable()) return;
  const std::string local = cma_between_processes_works() ? "cma" : "staging";
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

}  // namespace npgtest

#endif  // NPUGATHER_TEST_SUPPORT_SIMULATED_HOST_RANKS_H_
