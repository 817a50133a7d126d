// What the tests of the host backend share, over the C ABI and the harness: root info and
// communicators, random blocks of every rank checked byte by byte (equal, ragged, gapped, in
// place, from segments), ranks as forked processes that report through shared memory, and the
// leak checks of /dev/shm and /proc.
#ifndef NPUGATHER_TEST_SUPPORT_HOST_TEST_SUPPORT_H_
#define NPUGATHER_TEST_SUPPORT_HOST_TEST_SUPPORT_H_

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "block_layout.h"
#include "npugather.h"
#include "test_harness.h"

namespace npgtest {

inline std::vector<uint8_t> make_root_info(const char* bind = "127.0.0.1") {
  std::vector<uint8_t> info(NPG_ROOT_INFO_MAX_BYTES);
  size_t size = 0;
  CHECK_OK(npg_get_root_info("host", bind, info.data(), info.size(), &size));
  CHECK(std::string(npg_last_error()).empty());
  info.resize(size);
  return info;
}

inline npg_comm_t init_rank(int rank, int n, const std::vector<uint8_t>& info, uint32_t flags = 0,
                            int64_t timeout_ms = 20000, const char* domain = "test") {
  npg_comm_t comm = nullptr;
  CHECK_OK(npg_comm_init("host", rank, n, 0, domain, NPG_COMM_MULTI_THREAD, -1, nullptr, timeout_ms, flags, info.data(),
                         info.size(), &comm));
  CHECK(comm != nullptr);
  int32_t got = -1;
  CHECK_OK(npg_comm_rank(comm, &got));
  CHECK(got == rank);
  CHECK_OK(npg_comm_size(comm, &got));
  CHECK(got == n);
  return comm;
}

inline uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Rank r's bytes for a given seed; every rank can regenerate every other rank's block.
inline void fill_pattern(uint8_t* p, uint64_t len, uint64_t seed, int rank) {
  uint64_t base = splitmix(seed * 1315423911u + static_cast<uint64_t>(rank) + 1);
  uint64_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t v = splitmix(base + i);
    memcpy(p + i, &v, 8);
  }
  if (i < len) {
    uint64_t v = splitmix(base + i);
    memcpy(p + i, &v, len - i);
  }
}

constexpr uint8_t kSentinel = 0xEE;

// Ragged blocks, some empty, placed in a shuffled order with gaps between them.
inline Layout ragged_layout(int n, uint64_t max_count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Layout l;
  l.counts.resize(n);
  l.displs.resize(n);
  for (int r = 0; r < n; ++r) l.counts[r] = (r % 3 == 1) ? 0 : 1 + rng() % max_count;
  std::vector<int> order(n);
  for (int r = 0; r < n; ++r) order[r] = r;
  std::shuffle(order.begin(), order.end(), rng);
  uint64_t at = 0;
  for (int r : order) {
    at += rng() % 7;  // gap
    l.displs[r] = at;
    at += l.counts[r];
  }
  l.recv_elems = at + 3;
  return l;
}

// One rank's collective: fills, gathers, checks every byte including gap sentinels.
inline void gather_and_verify(npg_comm_t comm, int rank, int n, const Layout& l, npg_dtype_t dtype, bool in_place,
                              bool use_v, uint64_t seed) {
  const size_t w = npg_dtype_size(dtype);
  std::vector<uint8_t> recv(l.recv_elems * w + 1, kSentinel);
  std::vector<uint8_t> send(l.counts[rank] * w + 1);
  uint8_t* send_ptr = in_place ? recv.data() + l.displs[rank] * w : send.data();
  fill_pattern(send_ptr, l.counts[rank] * w, seed, rank);
  npg_result_t rc;
  if (use_v) {
    rc = npg_all_gather_v(comm, send_ptr, l.counts[rank], recv.data(), l.counts.data(), l.displs.data(), dtype);
  } else {
    rc = npg_all_gather(comm, send_ptr, recv.data(), l.counts[rank], dtype);
  }
  CHECK_RC(rc, NPG_SUCCESS);
  CHECK(std::string(npg_last_error()).empty());
  std::vector<bool> covered(recv.size(), false);
  std::vector<uint8_t> expect;
  for (int r = 0; r < n; ++r) {
    uint64_t len = l.counts[r] * w;
    expect.assign(len, 0);
    fill_pattern(expect.data(), len, seed, r);
    const uint8_t* got = recv.data() + l.displs[r] * w;
    if (len > 0 && memcmp(got, expect.data(), len) != 0) {
      uint64_t i = 0;
      while (got[i] == expect[i]) ++i;
      throw TestFailure("block of rank " + std::to_string(r) + " differs at byte " + std::to_string(i) + " of " +
                        std::to_string(len));
    }
    for (uint64_t i = 0; i < len; ++i) covered[l.displs[r] * w + i] = true;
  }
  for (size_t i = 0; i < recv.size(); ++i) {
    if (!covered[i] && recv[i] != kSentinel) throw TestFailure("byte " + std::to_string(i) + " outside blocks changed");
  }
}

// One all-gather of count random bytes per rank; every received byte is checked.
inline void gather_and_verify(npg_comm_t comm, int rank, int n, uint64_t count, uint64_t seed) {
  gather_and_verify(comm, rank, n, equal_layout(n, count), NPG_UINT8, false, false, seed);
}

// One rank's segmented collective: its block is sent from three pieces of a separate
// buffer (one of them empty); every other block must arrive, its own region stay untouched.
// Sends the block as `pieces` segments (at least 3): one byte, an empty one, then the rest
// cut at random places (some pieces empty), in order.
inline void gather_segments_and_verify(npg_comm_t comm, int rank, int n, const Layout& l, uint64_t seed,
                                       int pieces = 3) {
  std::vector<uint8_t> recv(l.recv_elems + 1, kSentinel);
  const uint64_t len = l.counts[rank];
  std::vector<uint8_t> source(len + 16);
  fill_pattern(source.data() + 16, len, seed, rank);
  const uint64_t first = std::min<uint64_t>(len, 1);
  std::vector<npg_segment_t> segments = {{source.data() + 16, first}, {source.data(), 0}};
  std::vector<uint64_t> cuts = {first, len};
  std::mt19937_64 rng(seed * 31 + static_cast<uint64_t>(rank));
  for (int i = 3; i < pieces; ++i) cuts.push_back(first + rng() % (len - first + 1));
  std::sort(cuts.begin(), cuts.end());
  for (size_t i = 1; i < cuts.size(); ++i)
    segments.push_back({source.data() + 16 + cuts[i - 1], cuts[i] - cuts[i - 1]});
  // The own block is not received, so its displacement is ignored (here it overlaps others).
  std::vector<uint64_t> displs = l.displs;
  displs[rank] = 0;
  CHECK_OK(
      npg_all_gather_v_segments(comm, segments.data(), segments.size(), recv.data(), l.counts.data(), displs.data()));
  std::vector<uint8_t> expect;
  for (int r = 0; r < n; ++r) {
    const uint8_t* got = recv.data() + l.displs[r];
    if (r == rank) {
      for (uint64_t i = 0; i < l.counts[r]; ++i) {
        if (got[i] != kSentinel) throw TestFailure("own region written at byte " + std::to_string(i));
      }
      continue;
    }
    expect.assign(l.counts[r], 0);
    fill_pattern(expect.data(), l.counts[r], seed, r);
    if (l.counts[r] > 0 && memcmp(got, expect.data(), l.counts[r]) != 0) {
      throw TestFailure("segmented send: block of rank " + std::to_string(r) + " differs");
    }
  }
}

inline void run_threads_segments_case(int n, uint32_t flags, const char* transport) {
  auto info = make_root_info();
  Layout l = ragged_layout(n, 200000, 90 + n);
  run_ranks(n, [&](int rank) {
    npg_comm_t comm = init_rank(rank, n, info, flags);
    std::string got = npg_comm_transport(comm);
    if (got != transport) throw TestFailure("transport is '" + got + "', expected '" + transport + "'");
    for (int it = 0; it < 2; ++it) gather_segments_and_verify(comm, rank, n, l, 300 + it);
    CHECK_OK(npg_comm_destroy(comm));
  });
}

// n ranks as threads, `iterations` collectives each.
inline void run_threads_case(int n, uint32_t flags, const Layout& l, npg_dtype_t dtype, bool in_place, bool use_v,
                             const char* transport, int iterations = 2) {
  auto info = make_root_info();
  run_ranks(n, [&](int rank) {
    npg_comm_t comm = init_rank(rank, n, info, flags);
    std::string got = npg_comm_transport(comm);
    if (got != transport) throw TestFailure("transport is '" + got + "', expected '" + transport + "'");
    for (int it = 0; it < iterations; ++it) gather_and_verify(comm, rank, n, l, dtype, in_place, use_v, 77 + it);
    CHECK_OK(npg_comm_destroy(comm));
  });
}

inline std::vector<std::string> shm_entries(const std::string& prefix) {
  std::vector<std::string> out;
  DIR* d = opendir("/dev/shm");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    if (strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) out.push_back(e->d_name);
  }
  closedir(d);
  return out;
}

// ---------------------------------------------------------------- processes
// ---------------------------------------------------------------- processes

constexpr int kMaxProcRanks = 8;

struct ProcShared {
  std::atomic<int> info_ready;
  std::atomic<int> inited;
  std::atomic<int> started;
  size_t info_size;
  uint8_t info[256];
  int root_pid;
  int rc[kMaxProcRanks];
  double elapsed_ms[kMaxProcRanks];
  std::atomic<int64_t> mark_ns;  // a moment in a test (steady clock, the same in every process)
  char transport[kMaxProcRanks][32];
  char error[kMaxProcRanks][512];
};

inline ProcShared* map_shared() {
  void* p = mmap(nullptr, sizeof(ProcShared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw TestFailure("mmap failed");
  return new (p) ProcShared();
}

// Called first in a forked rank's child: places it (e.g. on a simulated host) and returns
// the address the root binds to.
using Placement = std::function<std::string(int)>;

// Forks n ranks; the root child creates the root info and publishes it. body returns
// the child's exit code (0 = pass).
inline std::vector<pid_t> fork_ranks(int n, ProcShared* shared, const std::function<int(int, npg_comm_t)>& body,
                                     uint32_t flags, int64_t timeout_ms, const Placement& place = nullptr) {
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pids.push_back(fork_child([&, r] {
      int code = 90;
      try {
        const std::string bind = place ? place(r) : "127.0.0.1";
        if (r == 0) {
          size_t size = 0;
          if (npg_get_root_info("host", bind.c_str(), shared->info, sizeof(shared->info), &size) != NPG_SUCCESS) {
            return 91;
          }
          shared->info_size = size;
          shared->root_pid = getpid();
          shared->info_ready.store(1);
        }
        auto t0 = Clock::now();
        while (shared->info_ready.load() == 0) {
          if (ms_since(t0) > 10000) return 92;
          usleep(1000);
        }
        npg_comm_t comm = nullptr;
        npg_result_t rc = npg_comm_init("host", r, n, 0, "proc", NPG_COMM_MULTI_PROCESS, -1, nullptr, timeout_ms, flags,
                                        shared->info, shared->info_size, &comm);
        if (rc != NPG_SUCCESS) {
          snprintf(shared->error[r], sizeof(shared->error[r]), "%s", npg_last_error());
          return 93;
        }
        snprintf(shared->transport[r], sizeof(shared->transport[r]), "%s", npg_comm_transport(comm));
        shared->inited.fetch_add(1);
        code = body(r, comm);
        npg_comm_destroy(comm);
      } catch (const std::exception& e) {
        snprintf(shared->error[r], sizeof(shared->error[r]), "%s", e.what());
        code = 94;
      }
      return code;
    }));
  }
  return pids;
}

inline std::string child_report(const ProcShared* s, const std::vector<int>& codes) {
  std::string out;
  for (size_t r = 0; r < codes.size(); ++r) {
    out += " [rank " + std::to_string(r) + " exit " + std::to_string(codes[r]) + " " + s->error[r] + "]";
  }
  return out;
}

// ---------------------------------------------------------------- tests

// What process ranks that all passed leave behind: their pids (each names its /dev/shm
// objects) and the transport each ran.
struct ProcessRanks {
  std::vector<pid_t> pids;
  std::vector<std::string> transports;
};

// Forks n process ranks (fork_ranks) that run body and return 0 when it passes; waits for
// them up to limit_ms and fails, with every rank's report, unless all passed.
inline ProcessRanks run_process_ranks(int n, const std::function<void(int, npg_comm_t)>& body, uint32_t flags,
                                      int64_t timeout_ms, double limit_ms, const Placement& place = nullptr) {
  ProcShared* shared = map_shared();
  ProcessRanks ranks;
  ranks.pids = fork_ranks(
      n, shared,
      [&](int r, npg_comm_t comm) {
        body(r, comm);
        return 0;
      },
      flags, timeout_ms, place);
  const std::vector<int> codes = wait_children(ranks.pids, limit_ms);
  const std::string report = child_report(shared, codes);
  for (int r = 0; r < n; ++r) ranks.transports.push_back(shared->transport[r]);
  munmap(shared, sizeof(ProcShared));
  for (int c : codes)
    if (c != 0) throw TestFailure("process ranks failed:" + report);
  return ranks;
}

// The text after "op(rank r/n): ", which is the same on every rank of one failure.
inline std::string without_context(const std::string& error) {
  size_t at = error.find("): ");
  return at == std::string::npos ? error : error.substr(at + 3);
}

// rc is expected and the last error names needle.
inline void expect_arg_error(npg_result_t rc, npg_result_t expected, const char* needle) {
  if (rc != expected || !contains(npg_last_error(), needle)) {
    throw TestFailure(std::string("got ") + npg_result_name(rc) + " '" + npg_last_error() + "', expected " +
                      npg_result_name(expected) + " naming '" + needle + "'");
  }
}

// Sets the eager limit of the communicators made while it lives (ranks forked meanwhile
// inherit it), whatever the machine's default.
struct EagerLimit {
  explicit EagerLimit(const char* bytes) { setenv("NPUGATHER_EAGER_BYTES", bytes, 1); }
  ~EagerLimit() { unsetenv("NPUGATHER_EAGER_BYTES"); }
};

// A rank that closes its communicator (npg_comm_destroy, no abort) after this many collectives
// with deadline kLeaverTimeoutMs: its peers' next collective must fail within kLeaverBoundMs.
constexpr int kRunsBeforeLeaving = 20;
constexpr int64_t kLeaverTimeoutMs = 3000;
constexpr double kLeaverBoundMs = 1000;

// The steady clock in nanoseconds, the same in every process.
inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// Process rank r of a test where rank `leaver` leaves: kRunsBeforeLeaving checked gathers of
// `bytes` per rank (seeds from seed); then the leaver waits close_after_ms, marks the moment in
// shared->mark_ns, closes its communicator and lives on until the peers have their verdict,
// while each peer records its next gather's outcome in shared (and its end in ended[r] unless
// null). Returns the rank's exit code.
inline int leave_or_watch_the_leaver(int r, npg_comm_t comm, ProcShared* shared, int n, int leaver, uint64_t bytes,
                                     uint64_t seed, int close_after_ms, int64_t* ended) {
  for (int i = 0; i < kRunsBeforeLeaving; ++i) {
    gather_and_verify(comm, r, n, equal_layout(n, bytes), NPG_UINT8, false, false, seed + i);
  }
  if (r == leaver) {
    usleep(close_after_ms * 1000);
    shared->mark_ns.store(now_ns());
    if (npg_comm_destroy(comm) != NPG_SUCCESS) return 2;
    // Lives on until the peers have their verdict (fork_ranks' destroy of the dead handle then
    // fails harmlessly).
    auto t0 = Clock::now();
    while (shared->started.load() < n - 1 && ms_since(t0) < 10000) usleep(1000);
    return 0;
  }
  std::vector<uint8_t> send(bytes), recv(bytes * n);
  auto t0 = Clock::now();
  shared->rc[r] = npg_all_gather(comm, send.data(), recv.data(), bytes, NPG_UINT8);
  shared->elapsed_ms[r] = ms_since(t0);
  if (ended != nullptr) ended[r] = now_ns();
  snprintf(shared->error[r], sizeof(shared->error[r]), "%s", npg_last_error());
  shared->started.fetch_add(1);
  return 0;
}

// Entries of a /proc directory (open fds, threads) or lines of a /proc file (mappings).
inline int64_t count_dir_entries(const char* path) {
  int64_t n = 0;
  if (DIR* dir = opendir(path)) {
    while (dirent* e = readdir(dir)) n += e->d_name[0] != '.';
    closedir(dir);
  }
  return n;
}

inline int64_t count_lines(const char* path) {
  int64_t n = 0;
  if (FILE* f = fopen(path, "r")) {
    for (int c; (c = fgetc(f)) != EOF;) n += c == '\n';
    fclose(f);
  }
  return n;
}

inline int64_t open_fds() { return count_dir_entries("/proc/self/fd"); }

// After each test of a host program: nothing of this process is left in /dev/shm.
inline void expect_no_shared_memory_left() {
  const std::vector<std::string> left = shm_entries("npugather." + std::to_string(getpid()) + ".");
  if (!left.empty()) throw TestFailure("shared memory left behind: /dev/shm/" + left[0]);
}

// The runner's options of a host program.
inline RunOptions host_run_options() {
  RunOptions options;
  options.after_each = expect_no_shared_memory_left;
  return options;
}

}  // namespace npgtest

#endif  // NPUGATHER_TEST_SUPPORT_HOST_TEST_SUPPORT_H_
