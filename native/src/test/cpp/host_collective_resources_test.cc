// What a gather costs the machine: large receive buffers advised for huge pages, pages
// populated without losing a byte written meanwhile, and ranks that wait for a late peer
// sleeping instead of spinning.
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "npugather.h"
#include "support/host_test_support.h"

namespace {

using namespace npgtest;

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

// Resident pages of [p, p + bytes) (mincore).
size_t resident_pages(void* p, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((bytes + page - 1) / page);
  if (mincore(p, bytes, in.data()) != 0) throw TestFailure("mincore failed");
  return static_cast<size_t>(std::count_if(in.begin(), in.end(), [](unsigned char c) { return (c & 1) != 0; }));
}

// Resident memory of this process in KiB, as the kernel counts it (/proc/self/statm): pages
// mapped to the shared zero page, as a read fault maps them, do not count. -1 if unreadable.
long resident_kib() {
  FILE* f = fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  long size = 0, resident = 0;
  const bool ok = fscanf(f, "%ld %ld", &size, &resident) == 2;
  fclose(f);
  return ok ? resident * (sysconf(_SC_PAGESIZE) / 1024) : -1;
}

// npg_populate_pages faults a fresh buffer in without changing a byte, also while another
// thread writes into it (as a collective receiving into the buffer does): every byte written
// before, during and after it is kept.
void test_populating_pages_keeps_every_byte_written_meanwhile() {
  expect_arg_error(npg_populate_pages(nullptr, 5), NPG_INVALID_ARGUMENT, "address is NULL but bytes is 5");
  CHECK_OK(npg_populate_pages(nullptr, 0));
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
  const long rss_before = resident_kib();
  CHECK_OK(npg_populate_pages(mem, bytes));
  const long rss_after = resident_kib();
  const size_t after = resident_pages(mem, bytes);
  const size_t zeros =
      static_cast<size_t>(std::count(static_cast<uint8_t*>(mem), static_cast<uint8_t*>(mem) + bytes, uint8_t{0}));
  munmap(mem, bytes);
  if (before != 0 || after != bytes / page) {
    throw TestFailure("populating a fresh 48 MiB buffer left " + std::to_string(after) + " of " +
                      std::to_string(bytes / page) + " pages resident (" + std::to_string(before) + " before)");
  }
  CHECK(zeros == bytes);
  // Pages of their own, written: not the zero page that a read would have mapped.
  if (rss_before >= 0 && rss_after >= 0 && rss_after - rss_before < long(bytes / 1024) * 7 / 8) {
    throw TestFailure("populating a fresh 48 MiB buffer raised resident memory by " +
                      std::to_string(rss_after - rss_before) + " KiB");
  }
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

const TestCase kTests[] = {
    {"large_receive_buffer_is_advised_for_huge_pages", test_large_receive_buffer_is_advised_for_huge_pages},
    {"populating_pages_keeps_every_byte_written_meanwhile", test_populating_pages_keeps_every_byte_written_meanwhile},
    {"ranks_waiting_for_a_late_peer_sleep_when_they_outnumber_the_cpus",
     test_ranks_waiting_for_a_late_peer_sleep_when_they_outnumber_the_cpus},
};

}  // namespace

int main(int argc, char** argv) { return run_tests(argc, argv, kTests, host_run_options()); }
