// Ranks on 2 simulated hosts (network namespaces, support/simulated_host_ranks.h): the
// hierarchical transport gathers every byte, ranks as processes and as threads of one host
// process, and unequal hosts keep the flat ring (3 hosts: host_collective_three_simulated_hosts_test). Needs root and
// `ip`; elsewhere the tests pass empty and say why.
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

void test_ranks_on_2_simulated_hosts_gather_every_byte_hierarchically() { expect_hierarchical_gathers_on_hosts(2); }

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

const TestCase kTests[] = {
    {"ranks_on_2_simulated_hosts_gather_every_byte_hierarchically",
     test_ranks_on_2_simulated_hosts_gather_every_byte_hierarchically},
    {"rank_threads_on_2_simulated_hosts_gather_every_byte_hierarchically",
     test_rank_threads_on_2_simulated_hosts_gather_every_byte_hierarchically},
    {"unequal_ranks_per_simulated_host_keep_the_flat_ring", test_unequal_ranks_per_simulated_host_keep_the_flat_ring},
};

}  // namespace

int main(int argc, char** argv) { return run_tests(argc, argv, kTests, host_run_options()); }
