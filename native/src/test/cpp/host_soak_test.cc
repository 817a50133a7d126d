// Many communicators in a row, as a long-running executor creates them: after a warm-up,
// no growth in open file descriptors, threads, memory mappings or resident memory.
#include <unistd.h>

#include "support/host_test_support.h"

namespace {

using namespace npgtest;

struct Usage {
  int64_t fds;
  int64_t threads;
  int64_t mappings;
  int64_t resident_kib;
};

Usage usage() {
  Usage u;
  u.fds = open_fds();
  u.threads = count_dir_entries("/proc/self/task");
  u.mappings = count_lines("/proc/self/maps");
  long pages = 0, resident = 0;
  if (FILE* f = fopen("/proc/self/statm", "r")) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
  }
  u.resident_kib = resident * (sysconf(_SC_PAGESIZE) / 1024);
  return u;
}

// One communicator of 2 thread ranks over shared memory or the TCP ring, one gather.
void one_round(int round) {
  auto info = make_root_info();
  const uint32_t flags = round % 2 == 0 ? 0 : NPG_FLAG_FORCE_TCP;
  run_ranks(2, [&](int rank) {
    npg_comm_t comm = init_rank(rank, 2, info, flags, 10000);
    gather_and_verify(comm, rank, 2, 1 << 16, static_cast<uint64_t>(round));
    CHECK_OK(npg_comm_destroy(comm));
  });
}

void test_many_communicators_in_a_row_leak_no_fds_threads_mappings_or_memory() {
  for (int round = 0; round < 20; ++round) one_round(round);
  const Usage start = usage();
  const int kRounds = 300;
  for (int round = 0; round < kRounds; ++round) one_round(round);
  const Usage end = usage();
  printf(
      "  after %d communicators: fds %lld -> %lld, threads %lld -> %lld, mappings %lld -> %lld, resident %lld -> "
      "%lld KiB\n",
      kRounds, static_cast<long long>(start.fds), static_cast<long long>(end.fds),
      static_cast<long long>(start.threads), static_cast<long long>(end.threads),
      static_cast<long long>(start.mappings), static_cast<long long>(end.mappings),
      static_cast<long long>(start.resident_kib), static_cast<long long>(end.resident_kib));
  CHECK(end.fds == start.fds);
  CHECK(end.threads == start.threads);
  CHECK(end.mappings <= start.mappings + 2);             // the allocator may map an arena
  CHECK(end.resident_kib <= start.resident_kib + 4096);  // noise of the allocator, not a leak per round
}

const TestCase kTests[] = {
    {"many_communicators_in_a_row_leak_no_fds_threads_mappings_or_memory",
     test_many_communicators_in_a_row_leak_no_fds_threads_mappings_or_memory},
};

}  // namespace

int main(int argc, char** argv) { return run_tests(argc, argv, kTests, host_run_options()); }
