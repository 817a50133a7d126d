// Every byte arrives: the host backend's all-gathers through the C ABI on every transport
// (threads, cross-memory attach, staging, eager blocks, the TCP ring and log-N), ranks as
// threads and as forked processes, equal, ragged, gapped, in place and from segments.
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <random>
#include <string>
#include <vector>

#include "npugather.h"
#include "support/host_test_support.h"

namespace {

using namespace npgtest;

void test_threads_all_gather_delivers_every_byte_for_rank_sizes_1_2_3_4_8() {
  for (int n : {1, 2, 3, 4, 8}) {
    run_threads_case(n, 0, equal_layout(n, 1000 + 37 * n), NPG_FLOAT32, false, false, n == 1 ? "self" : "threads");
  }
}

void test_threads_all_gather_v_handles_ragged_empty_and_gapped_blocks() {
  for (int n : {2, 3, 4, 8}) {
    run_threads_case(n, 0, ragged_layout(n, 5000, 11 + n), NPG_INT16, false, true, "threads");
  }
}

void test_in_place_gather_keeps_own_block_and_fills_the_others() {
  run_threads_case(3, 0, equal_layout(3, 4099), NPG_INT32, true, false, "threads");
  run_threads_case(4, 0, ragged_layout(4, 3000, 5), NPG_INT8, true, true, "threads");
  run_threads_case(3, NPG_FLAG_FORCE_TCP, ragged_layout(3, 3000, 6), NPG_INT64, true, true, "tcp");
  run_threads_case(1, 0, equal_layout(1, 100), NPG_INT64, true, false, "self");
}

void test_every_dtype_width_round_trips() {
  for (npg_dtype_t t : {NPG_INT8, NPG_INT16, NPG_INT32, NPG_FLOAT16, NPG_FLOAT32, NPG_INT64, NPG_UINT8, NPG_BFLOAT16}) {
    run_threads_case(2, 0, ragged_layout(2, 777, 3 + t), t, false, true, "threads", 1);
  }
}

void test_forced_tcp_ring_on_loopback_for_2_3_4_ranks() {
  for (int n : {2, 3, 4}) {
    // (1 MiB + 13) elements are not a multiple of the 1 MiB socket chunk.
    run_threads_case(n, NPG_FLAG_FORCE_TCP, ragged_layout(n, (1 << 20) + 13, 21 + n), NPG_INT8, false, true, "tcp");
    run_threads_case(n, NPG_FLAG_FORCE_TCP, equal_layout(n, 12345), NPG_BFLOAT16, false, false, "tcp");
  }
}

void test_forced_tcp_ring_moves_16_mib_per_rank() {
  run_threads_case(3, NPG_FLAG_FORCE_TCP, equal_layout(3, 4u << 20), NPG_FLOAT32, false, false, "tcp", 1);
}

void test_forced_staging_with_small_chunk_splits_into_rounds() {
  setenv("NPUGATHER_STAGING_CHUNK_BYTES", "4096", 1);
  try {
    run_threads_case(3, NPG_FLAG_FORCE_STAGING, ragged_layout(3, 50000, 9), NPG_INT8, false, true, "staging", 3);
    run_threads_case(4, NPG_FLAG_FORCE_STAGING, equal_layout(4, 3000), NPG_INT32, true, false, "staging");
  } catch (...) {
    unsetenv("NPUGATHER_STAGING_CHUNK_BYTES");
    throw;
  }
  unsetenv("NPUGATHER_STAGING_CHUNK_BYTES");
}

// Yama's ptrace_scope >= 1 forbids cross-memory attach between sibling processes.
bool cma_allowed_by_kernel() {
  FILE* f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
  if (f == nullptr) return true;
  int scope = 0;
  bool read = fscanf(f, "%d", &scope) == 1;
  fclose(f);
  return !read || scope == 0;
}

void test_processes_gather_through_cross_memory_attach() {
  for (int n : {2, 3}) {
    Layout l = ragged_layout(n, 300000, 40 + n);
    const ProcessRanks ranks = run_process_ranks(
        n,
        [&](int r, npg_comm_t comm) {
          for (int it = 0; it < 3; ++it) {
            // A late rank: the others stop spinning and sleep until its post wakes them.
            if (it == 1 && r == n - 1) usleep(30000);
            gather_and_verify(comm, r, n, l, NPG_FLOAT16, it == 2, true, 500 + it);
          }
        },
        0, 20000, 30000);
    const std::string& transport = ranks.transports[0];
    // Where the kernel forbids CMA, staging is the documented fallback.
    std::string expected = cma_allowed_by_kernel() ? "cma" : "staging";
    if (transport != expected) {
      throw TestFailure("transport is '" + transport + "', expected '" + expected + "'");
    }
  }
}

void test_segmented_sends_deliver_every_block_and_leave_own_region_untouched() {
  run_threads_segments_case(1, 0, "self");
  run_threads_segments_case(4, 0, "threads");
  run_threads_segments_case(3, NPG_FLAG_FORCE_TCP, "tcp");
  setenv("NPUGATHER_STAGING_CHUNK_BYTES", "4096", 1);
  run_threads_segments_case(3, NPG_FLAG_FORCE_STAGING, "staging");
  unsetenv("NPUGATHER_STAGING_CHUNK_BYTES");
  Layout l = ragged_layout(3, 300000, 61);
  run_process_ranks(
      3,
      [&](int r, npg_comm_t comm) {
        // 3 pieces travel in the slot; 9 and 200 in the peer's segment array, 200 over
        // several process_vm_readv calls.
        for (int pieces : {3, 9, 200}) gather_segments_and_verify(comm, r, 3, l, 700 + pieces, pieces);
      },
      0, 20000, 30000);
}

// Blocks around the size from which copies stream past the cache (8 MiB): one just below, one
// at it, the others a ragged few bytes above, placed at odd offsets with gaps between them.
Layout blocks_around_8_mib(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Layout l;
  uint64_t at = 1 + rng() % 15;
  for (int r = 0; r < n; ++r) {
    const uint64_t count = r == 0 ? (8ull << 20) - 1 : r == 1 ? (8ull << 20) : (8ull << 20) + 1 + rng() % 99;
    l.counts.push_back(count);
    l.displs.push_back(at);
    at += count + rng() % 7;
  }
  l.recv_elems = at + 3;
  return l;
}

void test_large_blocks_arrive_intact_at_unaligned_places_from_unaligned_pieces() {
  const Layout l = blocks_around_8_mib(3, 8);
  run_threads_case(3, 0, l, NPG_INT8, false, true, "threads");
  auto info = make_root_info();
  run_ranks(3, [&](int rank) {
    npg_comm_t comm = init_rank(rank, 3, info);
    // The second piece starts one byte into the block: an unaligned source.
    for (int pieces : {3, 5}) gather_segments_and_verify(comm, rank, 3, l, 900 + pieces, pieces);
    CHECK_OK(npg_comm_destroy(comm));
  });
  run_process_ranks(
      3,
      [&](int r, npg_comm_t comm) {
        gather_and_verify(comm, r, 3, l, NPG_INT8, false, true, 910);
        gather_segments_and_verify(comm, r, 3, l, 911, 3);
      },
      0, 20000, 60000);
}

void test_processes_forced_staging_gather_every_byte() {
  const int n = 2;
  Layout l = ragged_layout(n, 3 << 20, 77);
  const ProcessRanks ranks = run_process_ranks(
      n, [&](int r, npg_comm_t comm) { gather_and_verify(comm, r, n, l, NPG_UINT8, false, true, 9); },
      NPG_FLAG_FORCE_STAGING, 20000, 30000);
  CHECK(ranks.transports[0] == "staging");
}

void test_forced_log_n_gathers_every_byte_for_2_to_9_ranks() {
  const uint32_t flags = NPG_FLAG_FORCE_TCP | NPG_FLAG_FORCE_LOG_N;
  for (int n : {2, 3, 4, 5, 7, 8, 9}) {
    run_threads_case(n, flags, ragged_layout(n, 70000, 31 + n), NPG_INT8, false, true, "tcp-log-n");
    run_threads_case(n, flags, equal_layout(n, 1001), NPG_FLOAT32, n % 2 == 0, false, "tcp-log-n");
  }
  // Larger than a socket chunk per block, and sends from segments.
  run_threads_case(5, flags, ragged_layout(5, (1 << 20) + 13, 37), NPG_INT8, true, true, "tcp-log-n", 1);
  run_threads_segments_case(6, flags, "tcp-log-n");
}

// Back-to-back collectives of small and mid-sized blocks over TCP: a rank's reader takes in
// bytes ahead of the block it reads, often the next collective's, and must keep them in order.
void test_back_to_back_small_blocks_over_tcp_keep_every_byte_in_order() {
  const uint64_t max_counts[] = {1, 64, 100, 4096, 16383, 16384, 16385, 40000, 3};
  auto run = [&](int n, uint32_t flags, const char* transport) {
    auto info = make_root_info();
    run_ranks(n, [&](int rank) {
      npg_comm_t comm = init_rank(rank, n, info, flags);
      CHECK(std::string(npg_comm_transport(comm)) == transport);
      for (int it = 0; it < 27; ++it) {
        const Layout l = ragged_layout(n, max_counts[it % 9], 1000 + it);
        gather_and_verify(comm, rank, n, l, NPG_UINT8, false, true, 1100 + it);
      }
      CHECK_OK(npg_comm_destroy(comm));
    });
  };
  for (int n : {2, 3}) run(n, NPG_FLAG_FORCE_TCP, "tcp");
  run(5, NPG_FLAG_FORCE_TCP | NPG_FLAG_FORCE_LOG_N, "tcp-log-n");
}

// From 4 ranks the default flat TCP transport runs log-N for small outputs and the ring,
// after the log-N header steps, for large ones: both deliver every byte.
void test_flat_tcp_picks_log_n_or_ring_by_size_and_delivers_every_byte() {
  for (int n : {4, 8}) {
    run_threads_case(n, NPG_FLAG_FORCE_TCP, equal_layout(n, 1000), NPG_UINT8, false, false, "tcp");
    run_threads_case(n, NPG_FLAG_FORCE_TCP, ragged_layout(n, 400000, 50 + n), NPG_UINT8, false, true, "tcp", 1);
    run_threads_case(n, NPG_FLAG_FORCE_TCP | NPG_FLAG_FORCE_RING, equal_layout(n, 1000), NPG_UINT8, false, false, "tcp",
                     1);
  }
  run_threads_segments_case(8, NPG_FLAG_FORCE_TCP, "tcp");
}

void test_default_bind_address_reaches_the_root() {
  auto info = make_root_info(nullptr);
  run_ranks(2, [&](int rank) {
    npg_comm_t comm = init_rank(rank, 2, info, NPG_FLAG_FORCE_TCP, 10000);
    gather_and_verify(comm, rank, 2, ragged_layout(2, 100000, 8), NPG_INT32, false, true, 4);
    CHECK_OK(npg_comm_destroy(comm));
  });
}

// Sizes around an eager limit of 32 KiB (EagerLimit), so that collectives alternate between
// all blocks eager, some eager, and none; every collective's bytes are checked.
const uint64_t kEagerMix[] = {1000, 20000, 40000, 100, 70000, 5, 16384, 32768, 300000, 2000};

void gather_eager_mix(npg_comm_t comm, int rank, int n, uint64_t seed) {
  int it = 0;
  for (uint64_t max : kEagerMix) {
    const Layout l = (it % 3 == 2) ? equal_layout(n, max) : ragged_layout(n, max, seed + it);
    if (it % 4 == 3) {
      gather_segments_and_verify(comm, rank, n, l, seed + 100 + it, 5);
    } else {
      gather_and_verify(comm, rank, n, l, NPG_UINT8, it % 4 == 1, true, seed + 200 + it);
    }
    ++it;
  }
}

void test_eager_and_direct_blocks_alternate_on_every_shared_memory_transport() {
  EagerLimit limit("32768");
  for (int n : {2, 3, 4, 8}) {
    auto info = make_root_info();
    run_ranks(n, [&](int rank) {
      npg_comm_t comm = init_rank(rank, n, info);
      CHECK(std::string(npg_comm_transport(comm)) == "threads");
      for (int round = 0; round < 2; ++round) gather_eager_mix(comm, rank, n, 1000 * n + 10 * round);
      CHECK_OK(npg_comm_destroy(comm));
    });
  }
  for (uint32_t flags : {0u, NPG_FLAG_FORCE_STAGING}) {
    const int n = 3;
    run_process_ranks(
        n, [&](int r, npg_comm_t comm) { gather_eager_mix(comm, r, n, 4000 + flags); }, flags, 20000, 60000);
  }
}

// Each rank decides for its own block alone: ranks whose eager limits differ (rank 0 never
// eager, rank 1 always up to the room there is, rank 2 up to 32 KiB) still gather every byte.
void test_ranks_with_different_eager_limits_gather_every_byte() {
  const int n = 3;
  // The placement runs in each forked rank before its init, so each reads its own limit.
  run_process_ranks(
      n, [&](int r, npg_comm_t comm) { gather_eager_mix(comm, r, n, 5000); }, 0, 20000, 60000,
      [&](int r) {
        if (r == 0) setenv("NPUGATHER_EAGER_BYTES", "0", 1);
        if (r == 1) setenv("NPUGATHER_EAGER_BYTES", "1000000000", 1);
        if (r == 2) setenv("NPUGATHER_EAGER_BYTES", "32768", 1);
        return std::string("127.0.0.1");
      });
}

void test_successful_runs_leave_no_shared_memory_behind() {
  std::string prefix = "npugather." + std::to_string(getpid()) + ".";
  CHECK(shm_entries(prefix).empty());
}

const TestCase kTests[] = {
    {"threads_all_gather_delivers_every_byte_for_rank_sizes_1_2_3_4_8",
     test_threads_all_gather_delivers_every_byte_for_rank_sizes_1_2_3_4_8},
    {"threads_all_gather_v_handles_ragged_empty_and_gapped_blocks",
     test_threads_all_gather_v_handles_ragged_empty_and_gapped_blocks},
    {"in_place_gather_keeps_own_block_and_fills_the_others", test_in_place_gather_keeps_own_block_and_fills_the_others},
    {"every_dtype_width_round_trips", test_every_dtype_width_round_trips},
    {"forced_tcp_ring_on_loopback_for_2_3_4_ranks", test_forced_tcp_ring_on_loopback_for_2_3_4_ranks},
    {"forced_tcp_ring_moves_16_mib_per_rank", test_forced_tcp_ring_moves_16_mib_per_rank},
    {"forced_staging_with_small_chunk_splits_into_rounds", test_forced_staging_with_small_chunk_splits_into_rounds},
    {"processes_gather_through_cross_memory_attach", test_processes_gather_through_cross_memory_attach},
    {"segmented_sends_deliver_every_block_and_leave_own_region_untouched",
     test_segmented_sends_deliver_every_block_and_leave_own_region_untouched},
    {"large_blocks_arrive_intact_at_unaligned_places_from_unaligned_pieces",
     test_large_blocks_arrive_intact_at_unaligned_places_from_unaligned_pieces},
    {"processes_forced_staging_gather_every_byte", test_processes_forced_staging_gather_every_byte},
    {"forced_log_n_gathers_every_byte_for_2_to_9_ranks", test_forced_log_n_gathers_every_byte_for_2_to_9_ranks},
    {"back_to_back_small_blocks_over_tcp_keep_every_byte_in_order",
     test_back_to_back_small_blocks_over_tcp_keep_every_byte_in_order},
    {"flat_tcp_picks_log_n_or_ring_by_size_and_delivers_every_byte",
     test_flat_tcp_picks_log_n_or_ring_by_size_and_delivers_every_byte},
    {"default_bind_address_reaches_the_root", test_default_bind_address_reaches_the_root},
    {"eager_and_direct_blocks_alternate_on_every_shared_memory_transport",
     test_eager_and_direct_blocks_alternate_on_every_shared_memory_transport},
    {"ranks_with_different_eager_limits_gather_every_byte", test_ranks_with_different_eager_limits_gather_every_byte},
    {"successful_runs_leave_no_shared_memory_behind", test_successful_runs_leave_no_shared_memory_behind},
};

}  // namespace

int main(int argc, char** argv) { return run_tests(argc, argv, kTests, host_run_options()); }
