// Ranks on 3 simulated hosts (network namespaces, support/simulated_host_ranks.h): the
// hierarchical transport gathers every byte on every transport. A program of its own: six
// process ranks take about a minute under qemu-aarch64. Needs root and `ip`; elsewhere the test
// passes empty and says why.
#include "support/simulated_host_ranks.h"

namespace {

using namespace npgtest;

void test_ranks_on_3_simulated_hosts_gather_every_byte_hierarchically() { expect_hierarchical_gathers_on_hosts(3); }

const TestCase kTests[] = {
    {"ranks_on_3_simulated_hosts_gather_every_byte_hierarchically",
     test_ranks_on_3_simulated_hosts_gather_every_byte_hierarchically},
};

}  // namespace

int main(int argc, char** argv) { return run_tests(argc, argv, kTests, host_run_options()); }
