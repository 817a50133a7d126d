// Tests of the host backend through the C ABI only: ranks as threads and as forked
// processes, every byte checked. The last line of output is "N passed, N failed".
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "npugather.h"
#include "simulated_hosts.h"

namespace {

using Clock = std::chrono::steady_clock;

struct TestFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string where(const char* file, int line) { return std::string(file) + ":" + std::to_string(line) + ": "; }

#define CHECK(cond)                                                                 \
  do {                                                                              \
    if (!(cond)) throw TestFailure(where(__FILE__, __LINE__) + "CHECK(" #cond ")"); \
  } while (0)

#define CHECK_RC(expr, expected)                                                                                \
  do {                                                                                                          \
    npg_result_t rc_ = (expr);                                                                                  \
    if (rc_ != (expected)) {                                                                                    \
      throw TestFailure(where(__FILE__, __LINE__) + #expr " returned " + npg_result_name(rc_) + ", expected " + \
                        npg_result_name(expected) + " (last error: " + npg_last_error() + ")");                 \
    }                                                                                                           \
  } while (0)

#define CHECK_OK(expr) CHECK_RC(expr, NPG_SUCCESS)

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// Runs fn(rank) on n threads; rethrows the first failure after all joined.
void run_ranks(int n, const std::function<void(int)>& fn) {
  std::mutex mutex;
  std::string first;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mutex);
        if (first.empty()) first = "rank " + std::to_string(r) + ": " + e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (!first.empty()) throw TestFailure(first);
}

std::vector<uint8_t> make_root_info(const char* bind = "127.0.0.1") {
  std::vector<uint8_t> info(NPG_ROOT_INFO_MAX_BYTES);
  size_t size = 0;
  CHECK_OK(npg_get_root_info("host", bind, info.data(), info.size(), &size));
  CHECK(std::string(npg_last_error()).empty());
  info.resize(size);
  return info;
}

npg_comm_t init_rank(int rank, int n, const std::vector<uint8_t>& info, uint32_t flags = 0, int64_t timeout_ms = 20000,
                     const char* domain = "test") {
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

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Rank r's bytes for a given seed; every rank can regenerate every other rank's block.
void fill_pattern(uint8_t* p, uint64_t len, uint64_t seed, int rank) {
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

struct Layout {
  std::vector<uint64_t> counts;  // elements
  std::vector<uint64_t> displs;  // elements
  uint64_t recv_elems = 0;
};

Layout equal_layout(int n, uint64_t count) {
  Layout l;
  for (int r = 0; r < n; ++r) {
    l.counts.push_back(count);
    l.displs.push_back(count * r);
  }
  l.recv_elems = count * n;
  return l;
}

// Ragged blocks, some empty, placed in a shuffled order with gaps between them.
Layout ragged_layout(int n, uint64_t max_count, uint64_t seed) {
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
void gather_and_verify(npg_comm_t comm, int rank, int n, const Layout& l, npg_dtype_t dtype, bool in_place, bool use_v,
                       uint64_t seed) {
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

// One rank's segmented collective: its block is sent from three pieces of a separate
// buffer (one of them empty); every other block must arrive, its own region stay untouched.
// Sends the block as `pieces` segments (at least 3): one byte, an empty one, then the rest
// cut at random places (some pieces empty), in order.
void gather_segments_and_verify(npg_comm_t comm, int rank, int n, const Layout& l, uint64_t seed, int pieces = 3) {
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

void run_threads_segments_case(int n, uint32_t flags, const char* transport) {
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
void run_threads_case(int n, uint32_t flags, const Layout& l, npg_dtype_t dtype, bool in_place, bool use_v,
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

std::vector<std::string> shm_entries(const std::string& prefix) {
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

ProcShared* map_shared() {
  void* p = mmap(nullptr, sizeof(ProcShared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw TestFailure("mmap failed");
  return new (p) ProcShared();
}

// Called first in a forked rank's child: places it (e.g. on a simulated host) and returns
// the address the root binds to.
using Placement = std::function<std::string(int)>;

// Forks n ranks; the root child creates the root info and publishes it. body returns
// the child's exit code (0 = pass).
std::vector<pid_t> fork_ranks(int n, ProcShared* shared, const std::function<int(int, npg_comm_t)>& body,
                              uint32_t flags, int64_t timeout_ms, const Placement& place = nullptr) {
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid < 0) throw TestFailure("fork failed");
    if (pid == 0) {
      int code = 90;
      try {
        const std::string bind = place ? place(r) : "127.0.0.1";
        if (r == 0) {
          size_t size = 0;
          if (npg_get_root_info("host", bind.c_str(), shared->info, sizeof(shared->info), &size) != NPG_SUCCESS) {
            _exit(91);
          }
          shared->info_size = size;
          shared->root_pid = getpid();
          shared->info_ready.store(1);
        }
        auto t0 = Clock::now();
        while (shared->info_ready.load() == 0) {
          if (ms_since(t0) > 10000) _exit(92);
          usleep(1000);
        }
        npg_comm_t comm = nullptr;
        npg_result_t rc = npg_comm_init("host", r, n, 0, "proc", NPG_COMM_MULTI_PROCESS, -1, nullptr, timeout_ms, flags,
                                        shared->info, shared->info_size, &comm);
        if (rc != NPG_SUCCESS) {
          snprintf(shared->error[r], sizeof(shared->error[r]), "%s", npg_last_error());
          _exit(93);
        }
        snprintf(shared->transport[r], sizeof(shared->transport[r]), "%s", npg_comm_transport(comm));
        shared->inited.fetch_add(1);
        code = body(r, comm);
        npg_comm_destroy(comm);
      } catch (const std::exception& e) {
        snprintf(shared->error[r], sizeof(shared->error[r]), "%s", e.what());
        code = 94;
      }
      _exit(code);
    }
    pids.push_back(pid);
  }
  return pids;
}

// Waits for all children; kills the rest after limit_ms. Returns exit codes (-signal if killed).
std::vector<int> wait_ranks(const std::vector<pid_t>& pids, double limit_ms) {
  std::vector<int> codes(pids.size(), -1000);
  auto t0 = Clock::now();
  size_t left = pids.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (codes[i] != -1000) continue;
      int status = 0;
      if (waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
        --left;
      }
    }
    if (left > 0 && ms_since(t0) > limit_ms) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (codes[i] == -1000) kill(pids[i], SIGKILL);
      limit_ms = 1e18;
    }
    usleep(2000);
  }
  return codes;
}

std::string child_report(const ProcShared* s, const std::vector<int>& codes) {
  std::string out;
  for (size_t r = 0; r < codes.size(); ++r) {
    out += " [rank " + std::to_string(r) + " exit " + std::to_string(codes[r]) + " " + s->error[r] + "]";
  }
  return out;
}

// ---------------------------------------------------------------- tests

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

// The VmFlags of the mapping of this process that holds addr ("" if none does).
std::string vm_flags_at(const void* addr) {
  FILE* f = fopen("/proc/self/smaps", "r");
  if (f == nullptr) throw TestFailure("cannot open /proc/self/smaps");
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  bool inside = false;
  std::string flags;
  char line[512];
  while (fgets(line, sizeof line, f) != nullptr) {
    unsigned long lo = 0, hi = 0;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      inside = lo <= a && a < hi;
    } else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
      flags = line + 8;
      break;
    }
  }
  fclose(f);
  return flags;
}

bool transparent_huge_pages_available() {
  FILE* f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (f == nullptr) return false;
  char line[128] = {0};
  bool ok = fgets(line, sizeof line, f) != nullptr && strstr(line, "[never]") == nullptr;
  fclose(f);
  return ok;
}

void expect_arg_error(npg_result_t rc, npg_result_t expected, const char* needle);

// Resident pages of [p, p + bytes) (mincore).
size_t resident_pages(void* p, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((bytes + page - 1) / page);
  if (mincore(p, bytes, in.data()) != 0) throw TestFailure("mincore failed");
  return static_cast<size_t>(std::count_if(in.begin(), in.end(), [](unsigned char c) { return (c & 1) != 0; }));
}

// The kernel populates pages on MADV_POPULATE_WRITE: it accepts the advice and the page is resident
// afterwards (an emulator may accept the advice and do nothing).
bool kernel_populates_pages() {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mem = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return false;
  const bool ok = madvise(mem, page, 23 /* MADV_POPULATE_WRITE */) == 0 && resident_pages(mem, page) == 1;
  munmap(mem, page);
  return ok;
}

// npg_populate_pages faults a fresh buffer in without changing a byte, also while another
// thread writes into it (as a collective receiving into the buffer does): every byte written
// before, during and after it is kept.
void test_populating_pages_keeps_every_byte_written_meanwhile() {
  expect_arg_error(npg_populate_pages(nullptr, 5), NPG_INVALID_ARGUMENT, "address is NULL but bytes is 5");
  CHECK_OK(npg_populate_pages(nullptr, 0));
  if (!kernel_populates_pages()) {
    printf("  (skipped: MADV_POPULATE_WRITE populates no page here)\n");
    return;
  }
  const size_t bytes = size_t(48) << 20;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (int round = 0; round < 3; ++round) {
    void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) throw TestFailure("mmap failed");
    uint8_t* buf = static_cast<uint8_t*>(mem);
    std::vector<uint8_t> expect(bytes);
    fill_pattern(expect.data(), bytes, 900 + round, round);
    const size_t head = bytes / 8;  // written before populating
    memcpy(buf, expect.data(), head);
    std::thread writer([&] {
      // The rest in 64 KiB steps, from the back, so that the writer meets pages both before
      // and after the populating thread has been there.
      for (size_t end = bytes; end > head;) {
        const size_t step = std::min<size_t>(64 << 10, end - head);
        end -= step;
        memcpy(buf + end, expect.data() + end, step);
      }
    });
    npg_result_t rc = npg_populate_pages(buf + 1, bytes - 1);
    writer.join();
    CHECK_OK(rc);
    const bool same = memcmp(buf, expect.data(), bytes) == 0;
    munmap(mem, bytes);
    if (!same) throw TestFailure("a byte written while the pages were populated was lost");
  }
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) throw TestFailure("mmap failed");
  const size_t before = resident_pages(mem, bytes);
  CHECK_OK(npg_populate_pages(mem, bytes));
  const size_t after = resident_pages(mem, bytes);
  const size_t zeros =
      static_cast<size_t>(std::count(static_cast<uint8_t*>(mem), static_cast<uint8_t*>(mem) + bytes, uint8_t{0}));
  munmap(mem, bytes);
  if (before != 0 || after != bytes / page) {
    throw TestFailure("populating a fresh 48 MiB buffer left " + std::to_string(after) + " of " +
                      std::to_string(bytes / page) + " pages resident (" + std::to_string(before) + " before)");
  }
  CHECK(zeros == bytes);
}

// CPU time of the calling thread.
double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// Ranks that wait for a late peer sleep rather than spin or yield their CPUs away, also when
// they outnumber the CPUs: while the last rank is 800 ms late, the others together use at most
// an eighth of the CPU time that spinning would (800 ms times the CPUs they could occupy; a
// waiter that yields instead of sleeping used 460 ms of 1600 here, on a busy machine).
// Measured as the waiting threads' CPU time, not as wall time.
void test_ranks_waiting_for_a_late_peer_sleep_when_they_outnumber_the_cpus() {
  const int cpus = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  const int n = std::min(16, std::max(4, 2 * cpus + 1));
  const uint64_t block = 4096;
  const auto late = std::chrono::milliseconds(800);
  auto info = make_root_info();
  std::vector<double> waited_cpu_ms(n, 0.0);
  run_ranks(n, [&](int rank) {
    npg_comm_t comm = init_rank(rank, n, info, 0, 60000);
    std::vector<uint8_t> send(block), recv(block * n);
    fill_pattern(send.data(), block, 77, rank);
    CHECK_OK(npg_all_gather(comm, send.data(), recv.data(), block, NPG_UINT8));  // everyone joined
    if (rank == n - 1) std::this_thread::sleep_for(late);
    const double cpu0 = thread_cpu_ms();
    const npg_result_t rc = npg_all_gather(comm, send.data(), recv.data(), block, NPG_UINT8);
    if (rank != n - 1) waited_cpu_ms[rank] = thread_cpu_ms() - cpu0;
    CHECK_OK(npg_comm_destroy(comm));
    CHECK_OK(rc);
    std::vector<uint8_t> expect(block);
    for (int r = 0; r < n; ++r) {
      fill_pattern(expect.data(), block, 77, r);
      if (memcmp(recv.data() + r * block, expect.data(), block) != 0) {
        throw TestFailure("block of rank " + std::to_string(r) + " differs");
      }
    }
  });
  double total = 0;
  for (double ms : waited_cpu_ms) total += ms;
  const double spinning = 800.0 * std::min(cpus, n - 1);
  printf("  %d ranks on %d CPUs: the waiting ranks used %.1f ms of CPU in all while one was 800 ms late\n", n, cpus,
         total);
  if (total > spinning / 8) {
    throw TestFailure("the " + std::to_string(n - 1) + " waiting ranks used " + std::to_string(total) +
                      " ms of CPU in 800 ms; spinning would use " + std::to_string(spinning));
  }
}

// A receive buffer of 4 MiB or more is advised for transparent huge pages before the first
// write (VmFlags "hg"); a smaller one is left alone. Every byte still arrives.
void test_large_receive_buffer_is_advised_for_huge_pages() {
  if (!transparent_huge_pages_available()) {
    printf("  (skipped: this kernel has no transparent huge pages)\n");
    return;
  }
  {
    const size_t bytes = size_t(6) << 20;
    void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) throw TestFailure("mmap failed");
    const npg_result_t rc = npg_advise_huge_pages(static_cast<uint8_t*>(mem) + 1, bytes - 1);
    const std::string flags = vm_flags_at(static_cast<uint8_t*>(mem) + bytes / 2);
    munmap(mem, bytes);
    CHECK_RC(rc, NPG_SUCCESS);
    if (flags.find(" hg") == std::string::npos) {
      throw TestFailure("npg_advise_huge_pages left VmFlags '" + flags + "'");
    }
  }
  for (uint64_t block : {uint64_t(3) << 20, uint64_t(1) << 19}) {
    const int n = 2;
    const uint64_t total = block * n;
    auto info = make_root_info();
    run_ranks(n, [&](int rank) {
      npg_comm_t comm = init_rank(rank, n, info, 0);
      void* mem = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (mem == MAP_FAILED) throw TestFailure("mmap of the receive buffer failed");
      uint8_t* recv = static_cast<uint8_t*>(mem);
      std::vector<uint8_t> send(block);
      fill_pattern(send.data(), block, 500, rank);
      const npg_result_t rc = npg_all_gather(comm, send.data(), recv, block, NPG_UINT8);
      std::string flags = vm_flags_at(recv + total / 2);
      bool same = true;
      std::vector<uint8_t> expect(block);
      for (int r = 0; r < n; ++r) {
        fill_pattern(expect.data(), block, 500, r);
        same = same && memcmp(recv + r * block, expect.data(), block) == 0;
      }
      munmap(mem, total);
      CHECK_RC(rc, NPG_SUCCESS);
      CHECK_OK(npg_comm_destroy(comm));
      if (!same) throw TestFailure("a block differs after a gather of " + std::to_string(total) + " bytes");
      const bool advised = flags.find(" hg") != std::string::npos;
      if (advised != (total >= (uint64_t(4) << 20))) {
        throw TestFailure("receive buffer of " + std::to_string(total) + " bytes has VmFlags '" + flags + "'");
      }
    });
  }
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
    ProcShared* shared = map_shared();
    Layout l = ragged_layout(n, 300000, 40 + n);
    auto pids = fork_ranks(
        n, shared,
        [&](int r, npg_comm_t comm) {
          for (int it = 0; it < 3; ++it) {
            // A late rank: the others stop spinning and sleep until its post wakes them.
            if (it == 1 && r == n - 1) usleep(30000);
            gather_and_verify(comm, r, n, l, NPG_FLOAT16, it == 2, true, 500 + it);
          }
          return 0;
        },
        0, 20000);
    auto codes = wait_ranks(pids, 30000);
    std::string transport = shared->transport[0];
    std::string report = child_report(shared, codes);
    munmap(shared, sizeof(ProcShared));
    for (int c : codes)
      if (c != 0) throw TestFailure("children failed:" + report);
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
  ProcShared* shared = map_shared();
  Layout l = ragged_layout(3, 300000, 61);
  auto pids = fork_ranks(
      3, shared,
      [&](int r, npg_comm_t comm) {
        // 3 pieces travel in the slot; 9 and 200 in the peer's segment array, 200 over
        // several process_vm_readv calls.
        for (int pieces : {3, 9, 200}) gather_segments_and_verify(comm, r, 3, l, 700 + pieces, pieces);
        return 0;
      },
      0, 20000);
  auto codes = wait_ranks(pids, 30000);
  std::string report = child_report(shared, codes);
  munmap(shared, sizeof(ProcShared));
  for (int c : codes)
    if (c != 0) throw TestFailure("children failed:" + report);
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
  ProcShared* shared = map_shared();
  auto pids = fork_ranks(
      3, shared,
      [&](int r, npg_comm_t comm) {
        gather_and_verify(comm, r, 3, l, NPG_INT8, false, true, 910);
        gather_segments_and_verify(comm, r, 3, l, 911, 3);
        return 0;
      },
      0, 20000);
  auto codes = wait_ranks(pids, 60000);
  std::string report = child_report(shared, codes);
  munmap(shared, sizeof(ProcShared));
  for (int c : codes)
    if (c != 0) throw TestFailure("children failed:" + report);
}

void test_processes_forced_staging_gather_every_byte() {
  ProcShared* shared = map_shared();
  const int n = 2;
  Layout l = ragged_layout(n, 3 << 20, 77);
  auto pids = fork_ranks(
      n, shared,
      [&](int r, npg_comm_t comm) {
        gather_and_verify(comm, r, n, l, NPG_UINT8, false, true, 9);
        return 0;
      },
      NPG_FLAG_FORCE_STAGING, 20000);
  auto codes = wait_ranks(pids, 30000);
  std::string transport = shared->transport[0];
  std::string report = child_report(shared, codes);
  munmap(shared, sizeof(ProcShared));
  for (int c : codes)
    if (c != 0) throw TestFailure("children failed:" + report);
  CHECK(transport == "staging");
}

// Rank `doubter` believes rank 0 sends `doubted` elements instead of 1000.
void expect_mismatch_on_every_rank(uint32_t flags, const char* transport, int n, int doubter, uint64_t doubted = 900) {
  auto info = make_root_info();
  std::vector<std::string> verdicts(n);
  run_ranks(n, [&](int rank) {
    npg_comm_t comm = init_rank(rank, n, info, flags);
    CHECK(std::string(npg_comm_transport(comm)) == transport);
    Layout l = equal_layout(n, 1000);
    if (rank == doubter) {
      l.counts[0] = doubted;
      l.recv_elems = 0;
      for (int r = 0; r < n; ++r) {
        l.displs[r] = l.recv_elems;
        l.recv_elems += l.counts[r];
      }
    }
    std::vector<uint8_t> send(l.counts[rank] * 4), recv(l.recv_elems * 4);
    npg_result_t rc =
        npg_all_gather_v(comm, send.data(), l.counts[rank], recv.data(), l.counts.data(), l.displs.data(), NPG_FLOAT32);
    CHECK_RC(rc, NPG_INVALID_USAGE);
    std::string error = npg_last_error();
    CHECK(contains(error, "ranks disagree on receive counts"));
    CHECK(contains(error, "npg_all_gather_v(rank " + std::to_string(rank) + "/" + std::to_string(n) + ")"));
    verdicts[rank] = error.substr(error.find("ranks disagree"));
    // The verdict is shared, so the communicator stays usable.
    gather_and_verify(comm, rank, n, equal_layout(n, 5000), NPG_FLOAT32, false, false, 3);
    CHECK_OK(npg_comm_destroy(comm));
  });
  for (int r = 1; r < n; ++r) {
    if (verdicts[r] != verdicts[0]) throw TestFailure("rank " + std::to_string(r) + " says '" + verdicts[r] + "'");
  }
}

void test_mismatched_counts_give_invalid_usage_on_every_rank() {
  expect_mismatch_on_every_rank(0, "threads", 3, 2);
  // The ring drops a block whose size its receiver disputes and still forwards its header:
  // the doubter last in the chain, in the middle, and next to the sender.
  for (int doubter : {3, 2, 1}) expect_mismatch_on_every_rank(NPG_FLAG_FORCE_TCP, "tcp", 4, doubter);
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

void test_log_n_mismatched_counts_give_invalid_usage_on_every_rank() {
  const uint32_t flags = NPG_FLAG_FORCE_TCP | NPG_FLAG_FORCE_LOG_N;
  for (int doubter : {4, 2, 1}) expect_mismatch_on_every_rank(flags, "tcp-log-n", 5, doubter);
  // The doubter's output is large (the ring's) while the others' is small (log-N's).
  expect_mismatch_on_every_rank(NPG_FLAG_FORCE_TCP, "tcp", 4, 3, 400000);
}

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
  auto codes = wait_ranks(pids, 20000);
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

void test_default_bind_address_reaches_the_root() {
  auto info = make_root_info(nullptr);
  run_ranks(2, [&](int rank) {
    npg_comm_t comm = init_rank(rank, 2, info, NPG_FLAG_FORCE_TCP, 10000);
    gather_and_verify(comm, rank, 2, ragged_layout(2, 100000, 8), NPG_INT32, false, true, 4);
    CHECK_OK(npg_comm_destroy(comm));
  });
}

void test_foreign_and_garbage_connections_during_init_are_dropped() {
  auto info = make_root_info();
  // Root endpoint from the root info: magic(4) version(4) id(16) secret(16) family(2) port(2) addr(16).
  uint16_t port = static_cast<uint16_t>(info[42] | (info[43] << 8));
  auto connect_root = [&]() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    memcpy(&sa.sin_addr, &info[44], 4);
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) throw TestFailure("connect failed");
    return fd;
  };
  int garbage = connect_root();
  const char junk[] = "GET / HTTP/1.0\r\n\r\n\xff\xff\xff\xff";
  CHECK(send(garbage, junk, sizeof(junk), 0) > 0);
  int oversized = connect_root();
  uint8_t big[12] = {'N', 'P', 'G', 'F', 1, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f};
  CHECK(send(oversized, big, sizeof(big), 0) > 0);
  int wrong_secret = connect_root();
  std::vector<uint8_t> hello = {'N', 'P', 'G', 'F', 1, 0, 0, 0, 0, 0, 0, 0};
  std::vector<uint8_t> body = {1, 0, 0, 0};
  body.insert(body.end(), info.begin() + 8, info.begin() + 24);                            // the right id
  for (int i = 0; i < 16; ++i) body.push_back(static_cast<uint8_t>(info[24 + i] ^ 0x5a));  // a wrong secret
  body.resize(body.size() + 100, 0);
  hello[8] = static_cast<uint8_t>(body.size());
  hello.insert(hello.end(), body.begin(), body.end());
  CHECK(send(wrong_secret, hello.data(), hello.size(), 0) > 0);
  int silent = connect_root();  // connects and never speaks: costs at most the per-connection limit
  auto t0 = Clock::now();
  run_ranks(2, [&](int rank) {
    npg_comm_t comm = init_rank(rank, 2, info, 0, 10000);
    gather_and_verify(comm, rank, 2, equal_layout(2, 999), NPG_INT8, false, false, 1);
    CHECK_OK(npg_comm_destroy(comm));
  });
  CHECK(ms_since(t0) < 5000);
  close(garbage);
  close(oversized);
  close(wrong_secret);
  close(silent);
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

void test_inconsistent_rank_size_fails_init_on_every_rank() {
  auto info = make_root_info();
  run_ranks(2, [&](int rank) {
    npg_comm_t comm = nullptr;
    int size = rank == 0 ? 2 : 3;
    npg_result_t rc =
        npg_comm_init("host", rank, size, 0, "", 0, -1, nullptr, 5000, 0, info.data(), info.size(), &comm);
    CHECK_RC(rc, NPG_INVALID_USAGE);
    CHECK(contains(npg_last_error(), "rank_size"));
  });
}

// The text after "op(rank r/n): ", which is the same on every rank of one failure.
std::string without_context(const std::string& error) {
  size_t at = error.find("): ");
  return at == std::string::npos ? error : error.substr(at + 3);
}

// Rank 1 passes a bad argument to one of the collectives, the others good ones: every rank
// fails at once with the same INVALID_USAGE naming rank 1 and its error, and the
// communicator still works afterwards.
void expect_local_rejection_reaches_every_rank(int n, uint32_t flags) {
  const int64_t timeout = 30000;
  auto info = make_root_info();
  std::mutex mutex;
  std::vector<std::string> errors(n * 3);
  run_ranks(n, [&](int rank) {
    npg_comm_t comm = init_rank(rank, n, info, flags, timeout);
    std::vector<uint8_t> send(64, static_cast<uint8_t>(rank)), recv(64 * n);
    std::vector<uint64_t> counts(n, 64), displs(n);
    for (int r = 0; r < n; ++r) displs[r] = 64 * r;
    for (int call = 0; call < 3; ++call) {
      const bool bad = rank == 1;
      auto t0 = Clock::now();
      npg_result_t rc;
      if (call == 0) {
        rc = npg_all_gather(comm, send.data(), recv.data(), 64, bad ? static_cast<npg_dtype_t>(99) : NPG_UINT8);
      } else if (call == 1) {
        rc = npg_all_gather_v(comm, send.data(), bad ? 63 : 64, recv.data(), counts.data(), displs.data(), NPG_UINT8);
      } else {
        npg_segment_t seg{bad ? nullptr : send.data(), 64};
        rc = npg_all_gather_v_segments(comm, &seg, 1, recv.data(), counts.data(), displs.data());
      }
      CHECK_RC(rc, NPG_INVALID_USAGE);
      CHECK(ms_since(t0) < timeout / 3);
      std::lock_guard<std::mutex> lock(mutex);
      errors[call * n + rank] = without_context(npg_last_error());
    }
    CHECK_OK(npg_all_gather(comm, send.data(), recv.data(), 64, NPG_UINT8));
    for (int r = 0; r < n; ++r) CHECK(recv[64 * r] == r && recv[64 * r + 63] == r);
    CHECK_OK(npg_comm_destroy(comm));
  });
  const char* expected[3] = {"rank 1 rejected its arguments: dtype 99 is not a known dtype; allowed values: 0 (int8)",
                             "rank 1 rejected its arguments: send_count 63 must equal recv_counts[1] = 64",
                             "rank 1 rejected its arguments: send_segments[0].address is NULL but its bytes is 64"};
  for (int call = 0; call < 3; ++call) {
    for (int r = 0; r < n; ++r) {
      if (errors[call * n + r] != errors[call * n] || !contains(errors[call * n], expected[call]) ||
          !contains(errors[call * n], "; no rank gathered anything")) {
        throw TestFailure("flags " + std::to_string(flags) + ", rank " + std::to_string(r) + ": '" +
                          errors[call * n + r] + "' vs rank 0's '" + errors[call * n] + "'");
      }
    }
  }
}

void test_a_rank_rejecting_its_arguments_fails_every_rank_at_once_with_the_same_error() {
  expect_local_rejection_reaches_every_rank(3, 0);
  expect_local_rejection_reaches_every_rank(3, NPG_FLAG_FORCE_TCP);
  expect_local_rejection_reaches_every_rank(2, NPG_FLAG_FORCE_STAGING);
  // Processes (cross-memory attach or staging): rank 1 passes dtype 99.
  const int n = 3;
  const int64_t timeout = 30000;
  ProcShared* shared = map_shared();
  auto pids = fork_ranks(
      n, shared,
      [&](int r, npg_comm_t comm) {
        std::vector<uint8_t> send(64), recv(64 * n);
        auto t0 = Clock::now();
        shared->rc[r] =
            npg_all_gather(comm, send.data(), recv.data(), 64, r == 1 ? static_cast<npg_dtype_t>(99) : NPG_UINT8);
        shared->elapsed_ms[r] = ms_since(t0);
        snprintf(shared->error[r], sizeof(shared->error[r]), "%s", without_context(npg_last_error()).c_str());
        return 0;
      },
      0, timeout);
  auto codes = wait_ranks(pids, 2.0 * timeout);
  std::string report = child_report(shared, codes);
  bool ok = true;
  for (int r = 0; r < n; ++r) {
    ok = ok && codes[r] == 0 && shared->rc[r] == NPG_INVALID_USAGE && shared->elapsed_ms[r] < timeout / 3 &&
         std::string(shared->error[r]) == shared->error[0] &&
         contains(shared->error[r], "rank 1 rejected its arguments: dtype 99 is not a known dtype");
  }
  munmap(shared, sizeof(ProcShared));
  if (!ok) throw TestFailure("processes:" + report);
}

void test_rank_root_mismatch_fails_every_rank_at_once_with_the_same_error() {
  // Rank 1 claims to be the root: it cannot take the root's listener, so it joins the real
  // root, which refuses its rank_root. Threads (either may take the listener first) and
  // processes; the timeout is long, the failure must not wait for it.
  const int64_t timeout = 30000;
  auto info = make_root_info();
  std::mutex mutex;
  std::vector<std::string> errors(2);
  run_ranks(2, [&](int rank) {
    npg_comm_t comm = nullptr;
    auto t0 = Clock::now();
    npg_result_t rc =
        npg_comm_init("host", rank, 2, rank, "", 0, -1, nullptr, timeout, 0, info.data(), info.size(), &comm);
    CHECK_RC(rc, NPG_INVALID_USAGE);
    CHECK(ms_since(t0) < timeout / 3);
    std::lock_guard<std::mutex> lock(mutex);
    errors[rank] = without_context(npg_last_error());
  });
  if (errors[0] != errors[1]) throw TestFailure("threads: '" + errors[0] + "' and '" + errors[1] + "'");
  if (!contains(errors[0], "passed rank_root 1 but root rank 0 passed rank_root 0") &&
      !contains(errors[0], "passed rank_root 0 but root rank 1 passed rank_root 1")) {
    throw TestFailure("threads: " + errors[0]);
  }
  make_root_info();  // nothing was left parked

  ProcShared* shared = map_shared();
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r) {
    pid_t pid = fork();
    if (pid < 0) throw TestFailure("fork failed");
    if (pid == 0) {
      if (r == 0) {
        size_t size = 0;
        if (npg_get_root_info("host", "127.0.0.1", shared->info, sizeof(shared->info), &size) != NPG_SUCCESS) _exit(91);
        shared->info_size = size;
        shared->info_ready.store(1);
      }
      while (shared->info_ready.load() == 0) usleep(1000);
      npg_comm_t comm = nullptr;
      auto t0 = Clock::now();
      shared->rc[r] = npg_comm_init("host", r, 2, r, "proc", NPG_COMM_MULTI_PROCESS, -1, nullptr, timeout, 0,
                                    shared->info, shared->info_size, &comm);
      shared->elapsed_ms[r] = ms_since(t0);
      snprintf(shared->error[r], sizeof(shared->error[r]), "%s", npg_last_error());
      _exit(0);
    }
    pids.push_back(pid);
  }
  auto codes = wait_ranks(pids, 2.0 * timeout);
  std::string report = child_report(shared, codes);
  bool same = without_context(shared->error[0]) == without_context(shared->error[1]);
  bool named = contains(shared->error[0], "rank 1 (pid ") &&
               contains(shared->error[0], "passed rank_root 1 but root rank 0 passed rank_root 0");
  bool fast = shared->elapsed_ms[0] < timeout / 3 && shared->elapsed_ms[1] < timeout / 3;
  bool usage = shared->rc[0] == NPG_INVALID_USAGE && shared->rc[1] == NPG_INVALID_USAGE;
  munmap(shared, sizeof(ProcShared));
  if (codes[0] != 0 || codes[1] != 0 || !same || !named || !fast || !usage) {
    throw TestFailure("processes:" + report);
  }
}

// Forks one process per rank, rank r passing rank_root roots[r]; maker's process makes the
// root info on the thread that then inits; late ranks wait until the others returned. Every
// child stays until all returned, so that what a failed rank left serving can still answer.
// Returns "" when every rank failed with NPG_INVALID_USAGE well within the timeout, else what
// went wrong; errors gets every rank's error text.
std::string run_rank_root_processes(const std::vector<int>& roots, int maker, const std::vector<bool>& late,
                                    int64_t timeout, std::vector<std::string>* errors) {
  const int n = static_cast<int>(roots.size());
  ProcShared* shared = map_shared();
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid < 0) throw TestFailure("fork failed");
    if (pid == 0) {
      if (r == maker) {
        size_t size = 0;
        if (npg_get_root_info("host", "127.0.0.1", shared->info, sizeof(shared->info), &size) != NPG_SUCCESS) _exit(91);
        shared->info_size = size;
        shared->info_ready.store(1);
      }
      while (shared->info_ready.load() == 0) usleep(1000);
      if (late[r]) {
        while (shared->inited.load() < n - 1) usleep(1000);
        usleep(100 * 1000);  // the root has refused the others by now
      }
      npg_comm_t comm = nullptr;
      auto t0 = Clock::now();
      shared->rc[r] = npg_comm_init("host", r, n, roots[r], "proc", NPG_COMM_MULTI_PROCESS, -1, nullptr, timeout, 0,
                                    shared->info, shared->info_size, &comm);
      shared->elapsed_ms[r] = ms_since(t0);
      snprintf(shared->error[r], sizeof(shared->error[r]), "%s", npg_last_error());
      shared->inited.fetch_add(1);
      while (shared->inited.load() < n) usleep(1000);
      _exit(0);
    }
    pids.push_back(pid);
  }
  auto codes = wait_ranks(pids, 2.0 * timeout);
  std::string problems;
  for (int r = 0; r < n; ++r) {
    errors->push_back(without_context(shared->error[r]));
    if (codes[r] != 0 || shared->rc[r] != NPG_INVALID_USAGE || shared->elapsed_ms[r] >= timeout / 3) {
      problems += " rank " + std::to_string(r) + " exited " + std::to_string(codes[r]) + " with rc " +
                  std::to_string(shared->rc[r]) + " after " + std::to_string(shared->elapsed_ms[r]) + " ms;";
    }
  }
  if (!problems.empty()) problems += child_report(shared, codes);
  munmap(shared, sizeof(ProcShared));
  return problems;
}

void expect_one_verdict(const std::string& where, const std::vector<std::string>& errors, const std::string& problems,
                        const std::vector<std::string>& words) {
  bool ok = problems.empty();
  for (const std::string& e : errors) ok = ok && e == errors[0];
  for (const std::string& w : words) ok = ok && contains(errors[0], w);
  if (!ok) {
    std::string all;
    for (const std::string& e : errors) all += " '" + e + "'";
    throw TestFailure(where + ":" + problems + all);
  }
}

void test_a_rank_that_made_the_root_info_but_names_another_root_fails_every_rank_at_once() {
  // Rank 0 makes the root info (the root's job) but passes rank_root 1; rank 1 passes rank_root
  // 0. Nobody is the root by its arguments: rank 0 serves the listener in the root's place and
  // refuses the first rank that joins, naming both values, on every rank. The timeout is long;
  // the failure must not wait for it.
  const int64_t timeout = 30000;
  std::vector<uint8_t> info;
  std::atomic<int> ready{0};
  std::mutex mutex;
  std::vector<std::string> errors(2);
  run_ranks(2, [&](int rank) {
    if (rank == 0) {
      info = make_root_info();
      ready.store(1);
    }
    while (ready.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    npg_comm_t comm = nullptr;
    auto t0 = Clock::now();
    npg_result_t rc =
        npg_comm_init("host", rank, 2, 1 - rank, "", 0, -1, nullptr, timeout, 0, info.data(), info.size(), &comm);
    CHECK_RC(rc, NPG_INVALID_USAGE);
    CHECK(ms_since(t0) < timeout / 3);
    std::lock_guard<std::mutex> lock(mutex);
    errors[rank] = without_context(npg_last_error());
  });
  if (errors[0] != errors[1] ||
      !contains(errors[0], "rank 1 (pid " + std::to_string(getpid()) + ") passed rank_root 0 but rank 0 (pid ") ||
      !contains(errors[0], "), which made the root info, passed rank_root 1")) {
    throw TestFailure("threads: '" + errors[0] + "' and '" + errors[1] + "'");
  }

  std::vector<std::string> procs;
  std::string problems = run_rank_root_processes({1, 0}, 0, {false, false}, timeout, &procs);
  expect_one_verdict(
      "processes", procs, problems,
      {"rank 1 (pid ", ") passed rank_root 0 but rank 0 (pid ", "), which made the root info, passed rank_root 1"});
  // Three ranks, three roots: rank 1 names itself (and joins rank 0 to say so), rank 2 names
  // rank 0, rank 0 made the root info and names rank 2.
  procs.clear();
  problems = run_rank_root_processes({2, 1, 0}, 0, {false, false, false}, timeout, &procs);
  expect_one_verdict("processes 2, 1, 0", procs, problems,
                     {"), which made the root info, passed rank_root 2", "passed rank_root "});
}

void test_a_rank_that_comes_after_the_root_refused_the_others_gets_the_same_verdict() {
  // Rank 2 passes rank_root 1, so root rank 0 refuses the init; rank 1, which agrees with the
  // root, comes only after that: the root's listener tells it the verdict at once instead of
  // refusing its connection until its timeout.
  const int64_t timeout = 30000;
  std::vector<std::string> procs;
  std::string problems = run_rank_root_processes({0, 0, 1}, 0, {false, true, false}, timeout, &procs);
  expect_one_verdict("processes, rank 1 late", procs, problems,
                     {"rank 2 (pid ", ") passed rank_root 1 but root rank 0 passed rank_root 0"});
  // A late rank that names itself the root joins the root to say so, and hears the verdict too.
  procs.clear();
  problems = run_rank_root_processes({0, 0, 2}, 0, {false, true, false}, timeout, &procs);
  expect_one_verdict("processes, rank 1 late, rank 2 claims the root", procs, problems,
                     {"rank 2 (pid ", ") passed rank_root 2 but root rank 0 passed rank_root 0"});
  procs.clear();
  problems = run_rank_root_processes({0, 1, 0}, 0, {false, false, true}, timeout, &procs);
  expect_one_verdict("processes, rank 2 late", procs, problems,
                     {"rank 1 (pid ", ") passed rank_root 1 but root rank 0 passed rank_root 0"});
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
    auto codes = wait_ranks(pids, 2.0 * timeout);
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
    auto codes = wait_ranks(survivors, 4 * timeout + 5000);
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

void expect_arg_error(npg_result_t rc, npg_result_t expected, const char* needle) {
  if (rc != expected || !contains(npg_last_error(), needle)) {
    throw TestFailure(std::string("got ") + npg_result_name(rc) + " '" + npg_last_error() + "', expected " +
                      npg_result_name(expected) + " naming '" + needle + "'");
  }
}

void test_argument_errors_name_the_argument() {
  std::vector<uint8_t> buf(NPG_ROOT_INFO_MAX_BYTES);
  size_t size = 0;
  expect_arg_error(npg_get_root_info("nccl", nullptr, buf.data(), buf.size(), &size), NPG_INVALID_ARGUMENT,
                   "backend 'nccl'");
  expect_arg_error(npg_get_root_info("host", "127.0.0.1", buf.data(), 8, &size), NPG_INVALID_ARGUMENT, "capacity");
  expect_arg_error(npg_advise_huge_pages(nullptr, 5), NPG_INVALID_ARGUMENT, "address is NULL but bytes is 5");
  CHECK_OK(npg_advise_huge_pages(nullptr, 0));
  CHECK_OK(npg_advise_huge_pages(buf.data(), buf.size()));  // under 4 MiB: left alone
  expect_arg_error(npg_get_root_info("host", "not an address!", buf.data(), buf.size(), &size), NPG_INVALID_ARGUMENT,
                   "bind_address");
  auto info = make_root_info();
  npg_comm_t comm = nullptr;
  auto init = [&](const char* backend, int rank, int n, int root, const char* domain, int64_t timeout, const void* ri,
                  size_t ri_size) {
    return npg_comm_init(backend, rank, n, root, domain, 0, -1, nullptr, timeout, 0, ri, ri_size, &comm);
  };
  expect_arg_error(init("lccl", 0, 1, 0, "", 1000, info.data(), info.size()), NPG_INVALID_ARGUMENT,
                   "backend lccl needs a device id");
  expect_arg_error(init("host", 0, 0, 0, "", 1000, info.data(), info.size()), NPG_INVALID_ARGUMENT, "rank_size 0");
  expect_arg_error(init("host", 2, 2, 0, "", 1000, info.data(), info.size()), NPG_INVALID_ARGUMENT, "rank 2");
  expect_arg_error(init("host", 0, 2, 5, "", 1000, info.data(), info.size()), NPG_INVALID_ARGUMENT, "rank_root 5");
  expect_arg_error(init("host", 0, 1, 0, "", 0, info.data(), info.size()), NPG_INVALID_ARGUMENT, "timeout_ms 0");
  std::string long_domain(200, 'd');
  expect_arg_error(init("host", 0, 1, 0, long_domain.c_str(), 1000, info.data(), info.size()), NPG_INVALID_ARGUMENT,
                   "comm_domain");
  expect_arg_error(init("host", 0, 1, 0, "", 1000, info.data(), 7), NPG_INVALID_ARGUMENT, "root_info_size 7");
  std::vector<uint8_t> bad = info;
  bad[0] = 'X';
  expect_arg_error(init("host", 0, 1, 0, "", 1000, bad.data(), bad.size()), NPG_INVALID_ARGUMENT, "root_info");
  std::vector<uint8_t> foreign = info;
  foreign[10] ^= 1;  // an id this process never created
  expect_arg_error(init("host", 0, 1, 0, "", 1000, foreign.data(), foreign.size()), NPG_INVALID_USAGE,
                   "not created in this process");
  CHECK(comm == nullptr);
  CHECK_OK(init("host", 0, 1, 0, "", 1000, info.data(), info.size()));
  CHECK(std::string(npg_last_error()).empty());
  CHECK(std::string(npg_comm_transport(comm)) == "self");
  npg_comm_t kept = comm;
  expect_arg_error(init("host", 0, 1, 0, "", 1000, info.data(), info.size()), NPG_INVALID_USAGE,
                   "not created in this process");  // its listener was consumed by the first init
  CHECK(comm == nullptr);
  comm = kept;
  std::vector<uint8_t> send(16), recv(16);
  expect_arg_error(npg_all_gather(comm, send.data(), recv.data(), 4, static_cast<npg_dtype_t>(9)), NPG_INVALID_ARGUMENT,
                   "dtype 9");
  expect_arg_error(npg_all_gather(comm, nullptr, recv.data(), 4, NPG_INT32), NPG_INVALID_ARGUMENT, "send is NULL");
  expect_arg_error(npg_all_gather(comm, send.data(), nullptr, 4, NPG_INT32), NPG_INVALID_ARGUMENT, "recv is NULL");
  expect_arg_error(npg_all_gather(comm, send.data(), recv.data(), UINT64_MAX / 2, NPG_INT32), NPG_INVALID_ARGUMENT,
                   "overflows");
  uint64_t counts[1] = {4};
  uint64_t displs[1] = {0};
  expect_arg_error(npg_all_gather_v(comm, send.data(), 3, recv.data(), counts, displs, NPG_INT32), NPG_INVALID_ARGUMENT,
                   "send_count 3");
  expect_arg_error(npg_all_gather_v(comm, send.data(), 4, recv.data(), nullptr, displs, NPG_INT32),
                   NPG_INVALID_ARGUMENT, "recv_counts");
  expect_arg_error(npg_all_gather(nullptr, send.data(), recv.data(), 4, NPG_INT32), NPG_INVALID_ARGUMENT,
                   "comm is NULL");
  // One rank has nobody to tell: its own error, at once.
  expect_arg_error(npg_comm_reject(comm, "send: my reason"), NPG_INVALID_ARGUMENT, "send: my reason");
  expect_arg_error(npg_comm_reject(comm, nullptr), NPG_INVALID_ARGUMENT, "reason is NULL");
  CHECK_OK(npg_all_gather(comm, send.data(), recv.data(), 4, NPG_INT32));
  CHECK(std::string(npg_last_error()).empty());
  CHECK_OK(npg_comm_destroy(comm));
  expect_arg_error(npg_comm_destroy(nullptr), NPG_INVALID_ARGUMENT, "comm is NULL");
  // Overlapping receive blocks are rejected before any communication.
  auto info2 = make_root_info();
  run_ranks(2, [&](int rank) {
    npg_comm_t c = init_rank(rank, 2, info2);
    uint64_t cnt[2] = {8, 8};
    uint64_t dsp[2] = {0, 4};
    std::vector<uint8_t> s(8), r(64);
    // Both ranks reject, tell each other, and fail with one verdict naming both.
    expect_arg_error(npg_all_gather_v(c, s.data(), 8, r.data(), cnt, dsp, NPG_UINT8), NPG_INVALID_USAGE,
                     "rank 0 rejected its arguments: recv_displs[1] = 4 makes rank 1's block overlap");
    CHECK(contains(npg_last_error(), "; rank 1 rejected its arguments: recv_displs[1] = 4"));
    CHECK(contains(npg_last_error(), "npg_all_gather_v(rank " + std::to_string(rank) + "/2)"));
    CHECK_OK(npg_comm_destroy(c));
  });
  CHECK(npg_dtype_size(NPG_BFLOAT16) == 2 && npg_dtype_size(NPG_INT64) == 8 &&
        npg_dtype_size(static_cast<npg_dtype_t>(6)) == 0);
  CHECK(std::string(npg_result_name(NPG_TIMEOUT)) == "NPG_TIMEOUT");
}

// ---------------------------------------------------------------- eager blocks on shared memory

// Sizes around an eager limit of 32 KiB (EagerLimit), so that collectives alternate between
// all blocks eager, some eager, and none; every collective's bytes are checked.
const uint64_t kEagerMix[] = {1000, 20000, 40000, 100, 70000, 5, 16384, 32768, 300000, 2000};

// Sets the eager limit of the communicators made while it lives (ranks forked meanwhile
// inherit it), whatever the machine's default.
struct EagerLimit {
  explicit EagerLimit(const char* bytes) { setenv("NPUGATHER_EAGER_BYTES", bytes, 1); }
  ~EagerLimit() { unsetenv("NPUGATHER_EAGER_BYTES"); }
};

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
    ProcShared* shared = map_shared();
    auto pids = fork_ranks(
        n, shared,
        [&](int r, npg_comm_t comm) {
          gather_eager_mix(comm, r, n, 4000 + flags);
          return 0;
        },
        flags, 20000);
    auto codes = wait_ranks(pids, 60000);
    std::string report = child_report(shared, codes);
    munmap(shared, sizeof(ProcShared));
    for (int c : codes)
      if (c != 0) throw TestFailure("children failed (flags " + std::to_string(flags) + "):" + report);
  }
}

// Each rank decides for its own block alone: ranks whose eager limits differ (rank 0 never
// eager, rank 1 always up to the room there is, rank 2 up to 32 KiB) still gather every byte.
void test_ranks_with_different_eager_limits_gather_every_byte() {
  const int n = 3;
  ProcShared* mixed = map_shared();
  // The placement runs in each forked rank before its init, so each reads its own limit.
  auto pids = fork_ranks(
      n, mixed,
      [&](int r, npg_comm_t comm) {
        gather_eager_mix(comm, r, n, 5000);
        return 0;
      },
      0, 20000,
      [&](int r) {
        if (r == 0) setenv("NPUGATHER_EAGER_BYTES", "0", 1);
        if (r == 1) setenv("NPUGATHER_EAGER_BYTES", "1000000000", 1);
        if (r == 2) setenv("NPUGATHER_EAGER_BYTES", "32768", 1);
        return std::string("127.0.0.1");
      });
  auto codes = wait_ranks(pids, 60000);
  std::string report = child_report(mixed, codes);
  munmap(mixed, sizeof(ProcShared));
  for (int c : codes)
    if (c != 0) throw TestFailure("children failed:" + report);
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
    auto codes = wait_ranks(pids, 60000);
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

// ---------------------------------------------------------------- a rank that leaves

// A rank that closes its communicator (npg_comm_destroy, no abort) while its process lives:
// the collectives it took part in succeed on every rank, even when it closes while its
// peers still finish the last one, and the peers' next collective fails within a second
// (the deadline is 3 s) with REMOTE_ERROR naming it, whether they already wait when it
// closes (close_after_ms > 0) or only enter afterwards.
constexpr int kRunsBeforeLeaving = 20;
constexpr int64_t kLeaverTimeoutMs = 3000;
constexpr double kLeaverBoundMs = 1000;

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
        for (int i = 0; i < kRunsBeforeLeaving; ++i) {
          gather_and_verify(comm, r, n, equal_layout(n, bytes), NPG_UINT8, false, false, 2000 + i);
        }
        if (r == leaver) {
          usleep(close_after_ms * 1000);
          shared->mark_ns.store(now_ns());
          if (npg_comm_destroy(comm) != NPG_SUCCESS) return 2;
          // Lives on until the peers have their verdict (fork_ranks' destroy of the dead
          // handle then fails harmlessly).
          auto t0 = Clock::now();
          while (shared->started.load() < n - 1 && ms_since(t0) < 10000) usleep(1000);
          return 0;
        }
        std::vector<uint8_t> send(bytes), recv(bytes * n);
        auto t0 = Clock::now();
        shared->rc[r] = npg_all_gather(comm, send.data(), recv.data(), bytes, NPG_UINT8);
        shared->elapsed_ms[r] = ms_since(t0);
        ended[r] = now_ns();
        snprintf(shared->error[r], sizeof(shared->error[r]), "%s", npg_last_error());
        shared->started.fetch_add(1);
        return 0;
      },
      flags, kLeaverTimeoutMs);
  auto codes = wait_ranks(pids, 30000);
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

void test_successful_runs_leave_no_shared_memory_behind() {
  std::string prefix = "npugather." + std::to_string(getpid()) + ".";
  CHECK(shm_entries(prefix).empty());
}

// ---------------------------------------------------------------- simulated hosts

// Whether one process can read another's memory, as init's cross-memory-attach probe does:
// Yama may forbid it, and an emulator (qemu-user) may not translate the addresses.
bool cma_between_processes_works() {
  static volatile uint64_t canary = 0x5eed5eed5eed5eedull;
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw TestFailure("fork failed");
  if (pid == 0) {
    uint64_t got = 0;
    iovec local{&got, sizeof(got)};
    iovec remote{const_cast<uint64_t*>(&canary), sizeof(got)};
    _exit(process_vm_readv(parent, &local, 1, &remote, 1, 0) == sizeof(got) && got == canary ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// True (after saying why) when this machine cannot simulate hosts: such tests then pass empty.
bool simulated_hosts_unavailable() {
  std::string reason = simulated::SimulatedHosts::unavailable_reason();
  if (!reason.empty()) printf("  (skipped: %s)\n", reason.c_str());
  return !reason.empty();
}

// Rank r runs on host r % hosts, so the ranks of one host are not consecutive.
std::vector<pid_t> fork_on_hosts(const simulated::SimulatedHosts& net, int n, ProcShared* shared,
                                 const std::function<int(int, npg_comm_t)>& body, uint32_t flags, int64_t timeout_ms) {
  return fork_ranks(n, shared, body, flags, timeout_ms, [&net](int r) {
    net.enter(r % net.hosts());
    return net.address(0);
  });
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
  ProcShared* shared = map_shared();
  auto pids = fork_on_hosts(
      net, n, shared,
      [&](int r, npg_comm_t comm) {
        body(r, comm);
        return 0;
      },
      flags, 20000);
  auto codes = wait_ranks(pids, 120000);
  std::string report = child_report(shared, codes);
  std::vector<std::string> transports;
  for (int r = 0; r < n; ++r) transports.push_back(shared->transport[r]);
  munmap(shared, sizeof(ProcShared));
  for (int c : codes)
    if (c != 0) throw TestFailure("children failed:" + report);
  for (int r = 0; r < n; ++r) {
    if (transports[r] != transport) {
      throw TestFailure("rank " + std::to_string(r) + " ran '" + transports[r] + "', expected '" + transport + "'");
    }
  }
  expect_no_shm_of(pids);
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
      pid_t pid = fork();
      if (pid < 0) throw TestFailure("fork failed");
      if (pid == 0) {
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
        _exit(code);
      }
      pids.push_back(pid);
    }
    auto codes = wait_ranks(pids, 120000);
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
      auto pids = fork_on_hosts(
          net, n, shared,
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
          flags, timeout);
      auto t0 = Clock::now();
      while (shared->started.load() < n && ms_since(t0) < 30000) usleep(1000);
      usleep(300 * 1000);
      kill(pids[victim], SIGKILL);
      auto codes = wait_ranks(pids, 60000);
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
    auto pids = fork_on_hosts(
        net, n, shared,
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
        0, kLeaverTimeoutMs);
    auto codes = wait_ranks(pids, 30000);
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

struct TestCase {
  const char* name;
  void (*fn)();
};

const TestCase kTests[] = {
    {"threads_all_gather_delivers_every_byte_for_rank_sizes_1_2_3_4_8",
     test_threads_all_gather_delivers_every_byte_for_rank_sizes_1_2_3_4_8},
    {"threads_all_gather_v_handles_ragged_empty_and_gapped_blocks",
     test_threads_all_gather_v_handles_ragged_empty_and_gapped_blocks},
    {"in_place_gather_keeps_own_block_and_fills_the_others", test_in_place_gather_keeps_own_block_and_fills_the_others},
    {"every_dtype_width_round_trips", test_every_dtype_width_round_trips},
    {"forced_tcp_ring_on_loopback_for_2_3_4_ranks", test_forced_tcp_ring_on_loopback_for_2_3_4_ranks},
    {"forced_tcp_ring_moves_16_mib_per_rank", test_forced_tcp_ring_moves_16_mib_per_rank},
    {"large_receive_buffer_is_advised_for_huge_pages", test_large_receive_buffer_is_advised_for_huge_pages},
    {"forced_staging_with_small_chunk_splits_into_rounds", test_forced_staging_with_small_chunk_splits_into_rounds},
    {"processes_gather_through_cross_memory_attach", test_processes_gather_through_cross_memory_attach},
    {"segmented_sends_deliver_every_block_and_leave_own_region_untouched",
     test_segmented_sends_deliver_every_block_and_leave_own_region_untouched},
    {"large_blocks_arrive_intact_at_unaligned_places_from_unaligned_pieces",
     test_large_blocks_arrive_intact_at_unaligned_places_from_unaligned_pieces},
    {"processes_forced_staging_gather_every_byte", test_processes_forced_staging_gather_every_byte},
    {"mismatched_counts_give_invalid_usage_on_every_rank", test_mismatched_counts_give_invalid_usage_on_every_rank},
    {"forced_log_n_gathers_every_byte_for_2_to_9_ranks", test_forced_log_n_gathers_every_byte_for_2_to_9_ranks},
    {"back_to_back_small_blocks_over_tcp_keep_every_byte_in_order",
     test_back_to_back_small_blocks_over_tcp_keep_every_byte_in_order},
    {"flat_tcp_picks_log_n_or_ring_by_size_and_delivers_every_byte",
     test_flat_tcp_picks_log_n_or_ring_by_size_and_delivers_every_byte},
    {"log_n_mismatched_counts_give_invalid_usage_on_every_rank",
     test_log_n_mismatched_counts_give_invalid_usage_on_every_rank},
    {"rank_that_never_calls_gather_makes_others_time_out", test_rank_that_never_calls_gather_makes_others_time_out},
    {"rank_that_never_joins_makes_init_time_out", test_rank_that_never_joins_makes_init_time_out},
    {"killed_process_rank_fails_survivors_promptly_and_leaves_no_shm",
     test_killed_process_rank_fails_survivors_promptly_and_leaves_no_shm},
    {"default_bind_address_reaches_the_root", test_default_bind_address_reaches_the_root},
    {"foreign_and_garbage_connections_during_init_are_dropped",
     test_foreign_and_garbage_connections_during_init_are_dropped},
    {"abort_from_another_thread_ends_a_blocked_gather_promptly",
     test_abort_from_another_thread_ends_a_blocked_gather_promptly},
    {"inconsistent_rank_size_fails_init_on_every_rank", test_inconsistent_rank_size_fails_init_on_every_rank},
    {"argument_errors_name_the_argument", test_argument_errors_name_the_argument},
    {"a_rank_rejecting_its_arguments_fails_every_rank_at_once_with_the_same_error",
     test_a_rank_rejecting_its_arguments_fails_every_rank_at_once_with_the_same_error},
    {"rank_root_mismatch_fails_every_rank_at_once_with_the_same_error",
     test_rank_root_mismatch_fails_every_rank_at_once_with_the_same_error},
    {"a_rank_that_made_the_root_info_but_names_another_root_fails_every_rank_at_once",
     test_a_rank_that_made_the_root_info_but_names_another_root_fails_every_rank_at_once},
    {"a_rank_that_comes_after_the_root_refused_the_others_gets_the_same_verdict",
     test_a_rank_that_comes_after_the_root_refused_the_others_gets_the_same_verdict},
    {"an_abort_is_named_as_the_abort_on_every_other_rank", test_an_abort_is_named_as_the_abort_on_every_other_rank},
    {"a_stalled_rank_on_the_ring_is_named_by_the_ranks_after_it",
     test_a_stalled_rank_on_the_ring_is_named_by_the_ranks_after_it},
    {"a_stopped_rank_on_the_ring_is_named_by_every_other_rank",
     test_a_stopped_rank_on_the_ring_is_named_by_every_other_rank},
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
    {"eager_and_direct_blocks_alternate_on_every_shared_memory_transport",
     test_eager_and_direct_blocks_alternate_on_every_shared_memory_transport},
    {"ranks_with_different_eager_limits_gather_every_byte", test_ranks_with_different_eager_limits_gather_every_byte},
    {"rank_killed_during_eager_gathers_fails_every_survivor",
     test_rank_killed_during_eager_gathers_fails_every_survivor},
    {"abort_during_eager_gathers_ends_every_rank", test_abort_during_eager_gathers_ends_every_rank},
    {"a_rank_closing_its_communicator_fails_its_peers_at_once_on_every_transport",
     test_a_rank_closing_its_communicator_fails_its_peers_at_once_on_every_transport},
    {"successful_runs_leave_no_shared_memory_behind", test_successful_runs_leave_no_shared_memory_behind},
    {"populating_pages_keeps_every_byte_written_meanwhile", test_populating_pages_keeps_every_byte_written_meanwhile},
    {"ranks_waiting_for_a_late_peer_sleep_when_they_outnumber_the_cpus",
     test_ranks_waiting_for_a_late_peer_sleep_when_they_outnumber_the_cpus},
};

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  // Arguments: [FILTER] [--skip=NAME...]; runs the tests whose name contains FILTER and none of
  // the skipped names (an emulator without a syscall a test needs skips that test).
  const char* filter = nullptr;
  std::vector<std::string> skipped;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--skip=", 0) == 0) {
      skipped.push_back(arg.substr(7));
    } else {
      filter = argv[i];
    }
  }
  int passed = 0;
  int failed = 0;
  for (const TestCase& t : kTests) {
    if (filter != nullptr && !contains(t.name, filter)) continue;
    bool skip = false;
    for (const std::string& name : skipped) skip = skip || contains(t.name, name);
    if (skip) continue;
    auto t0 = Clock::now();
    try {
      t.fn();
      // Every communicator a test made in this process is destroyed by its end.
      if (npg_live_comms() != 0) {
        throw TestFailure(std::to_string(npg_live_comms()) + " communicators left alive");
      }
      ++passed;
      printf("PASS %s (%.0f ms)\n", t.name, ms_since(t0));
    } catch (const std::exception& e) {
      ++failed;
      printf("FAIL %s (%.0f ms): %s\n", t.name, ms_since(t0), e.what());
    }
    fflush(stdout);
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
