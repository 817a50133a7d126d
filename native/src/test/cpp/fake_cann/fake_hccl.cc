// Simulated libhccl.so: ranks rendezvous through a POSIX shared-memory control block named
// in the root info (or derived from the rank table file); every collective really moves each
// rank's bytes to every other rank through per-rank shared-memory data segments.
// Test-only; see fake_cann.h.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fake_cann.h"

namespace fake_cann {
namespace {

constexpr int kMaxRanks = 64;
constexpr char kRootMagic[] = "NPGFAKEHCCL1";
constexpr size_t kRootInfoBytes = 4108;

struct alignas(64) Slot {
  std::atomic<uint64_t> posted;  // generation whose data is in the rank's data segment
  std::atomic<uint64_t> done;    // generation the rank finished reading
  std::atomic<uint64_t> bytes;
  std::atomic<int32_t> pid;
};

struct Control {
  std::atomic<int32_t> n;
  std::atomic<int32_t> joined;
  std::atomic<int32_t> ready;
  std::atomic<int32_t> failed;  // 1 + the rank whose collective failed, 0 when none
  Slot slots[kMaxRanks];
};

std::atomic<int> g_all_gather_v_calls{0};
std::mutex g_attempts_mutex;
std::vector<int>* g_init_attempts = new std::vector<int>(kMaxRanks, 0);

std::string env(const char* name) {
  const char* v = getenv(name);
  return v ? std::string(v) : std::string();
}

int64_t connect_timeout_ms() {
  std::string v = env("NPUGATHER_FAKE_CANN_CONNECT_TIMEOUT_MS");
  if (!v.empty()) return atoll(v.c_str());
  v = env("HCCL_CONNECT_TIMEOUT");
  return (v.empty() ? 120 : atoll(v.c_str())) * 1000;
}

[[maybe_unused]] int width_of(int dtype) {
  switch (dtype) {
    case 0: case 7: case 14: case 15: case 16: case 17: return 1;
    case 1: case 3: case 8: case 11: return 2;
    case 2: case 4: case 9: return 4;
    case 5: case 6: case 10: return 8;
    case 12: return 16;
  }
  return 0;
}

struct Comm {
  std::string name;
  int32_t rank = 0;
  int32_t n = 0;
  Control* ctl = nullptr;
  int data_fd = -1;
  size_t data_capacity = 0;
  std::vector<int> peer_fds;
  uint64_t generation = 0;  // touched only by the stream thread and the enqueueing thread, in order
  std::atomic<bool> cancelled{false};

  ~Comm() {
    if (ctl != nullptr) munmap(ctl, sizeof(Control));
    if (data_fd >= 0) ::close(data_fd);
    for (int fd : peer_fds)
      if (fd >= 0) ::close(fd);
    count_comms(-1);
  }
};

// The handle HCCL hands out; the state lives on while a queued task still needs it.
struct CommHandle {
  std::shared_ptr<Comm> comm;
};

[[maybe_unused]] std::string data_name(const std::string& name, int rank) { return name + "-d" + std::to_string(rank); }

[[maybe_unused]] bool peer_dead(const Comm& c) {
  for (int r = 0; r < c.n; ++r) {
    int32_t pid = c.ctl->slots[r].pid.load();
    if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) return true;
  }
  return false;
}

// Waits until pred() holds; 0, or the stream error that ended the wait.
template <typename Pred>
int wait_for_peers(const Comm& c, const std::atomic<bool>& cancelled, Pred pred) {
  for (int spins = 0;; ++spins) {
    if (pred()) return kAclSuccess;
    if (cancelled.load() || c.cancelled.load()) return kAclErrorRtDeviceTaskAbort;
    if (c.ctl->failed.load() != 0) return kAclErrorRtSuspectRemoteError;
    if (spins % 1000 == 999 && peer_dead(c)) return kAclErrorRtSuspectRemoteError;
    if (spins < 100) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

[[maybe_unused]] int rendezvous(const std::string& name, uint32_t n, uint32_t rank, void** out) {
  if (n == 0 || n > kMaxRanks || rank >= n) return kHcclEPara;
  int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) return kHcclEInternal;
  struct stat st;
  if (fstat(fd, &st) != 0 || (st.st_size < static_cast<off_t>(sizeof(Control)) && ftruncate(fd, sizeof(Control)) != 0)) {
    ::close(fd);
    return kHcclEInternal;
  }
  void* map = mmap(nullptr, sizeof(Control), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return kHcclEInternal;
  auto comm = std::make_shared<Comm>();
  count_comms(1);
  comm->name = name;
  comm->rank = static_cast<int32_t>(rank);
  comm->n = static_cast<int32_t>(n);
  comm->ctl = static_cast<Control*>(map);
  Control* ctl = comm->ctl;
  comm->data_fd = shm_open(data_name(name, rank).c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
  if (comm->data_fd < 0) return kHcclEInternal;
  int32_t expected = 0;
  if (!ctl->n.compare_exchange_strong(expected, static_cast<int32_t>(n)) && expected != static_cast<int32_t>(n)) {
    shm_unlink(data_name(name, rank).c_str());
    return kHcclEPara;
  }
  ctl->slots[rank].pid.store(getpid());
  ctl->joined.fetch_add(1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(connect_timeout_ms());
  auto wait_count = [&](std::atomic<int32_t>& counter) {
    while (counter.load() < static_cast<int32_t>(n)) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    return true;
  };
  if (!wait_count(ctl->joined)) {
    shm_unlink(data_name(name, rank).c_str());
    if (ctl->joined.fetch_sub(1) == 1) shm_unlink(name.c_str());
    set_recent_error("simulated HCCL: not every rank joined within the connect timeout");
    return kHcclETimeout;
  }
  comm->peer_fds.assign(n, -1);
  for (uint32_t r = 0; r < n; ++r) {
    comm->peer_fds[r] = shm_open(data_name(name, r).c_str(), O_RDONLY, 0);
    if (comm->peer_fds[r] < 0) return kHcclEInternal;
  }
  ctl->ready.fetch_add(1);
  if (!wait_count(ctl->ready)) {
    shm_unlink(data_name(name, rank).c_str());
    shm_unlink(name.c_str());
    return kHcclETimeout;
  }
  // Everyone has everything open: no names stay behind.
  shm_unlink(data_name(name, rank).c_str());
  shm_unlink(name.c_str());
  *out = new CommHandle{comm};
  return kHcclSuccess;
}

[[maybe_unused]] int injected_init_failure(uint32_t rank) {
  std::string code = env("NPUGATHER_FAKE_CANN_INIT_FAIL");
  if (code.empty()) return kHcclSuccess;
  std::string times = env("NPUGATHER_FAKE_CANN_INIT_FAIL_TIMES");
  set_recent_error("simulated HCCL: injected init failure");
  if (times.empty()) return atoi(code.c_str());
  std::lock_guard<std::mutex> lock(g_attempts_mutex);
  int& attempts = (*g_init_attempts)[rank % kMaxRanks];
  if (!times.empty() && attempts >= atoi(times.c_str())) return kHcclSuccess;
  ++attempts;
  return atoi(code.c_str());
}

// Copies this rank's block out and every rank's block in; place(r, src, bytes) stores rank r's block.
template <typename Place>
int gather_task(const std::shared_ptr<Comm>& c, uint64_t gen, const uint8_t* send, uint64_t bytes,
                const std::atomic<bool>& cancelled, Place place) {
  if (env("NPUGATHER_FAKE_CANN_HANG") == "allgather") {
    while (!cancelled.load() && !c->cancelled.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return kAclErrorRtDeviceTaskAbort;
  }
  Slot& me = c->ctl->slots[c->rank];
  if (bytes > c->data_capacity) {
    if (ftruncate(c->data_fd, static_cast<off_t>(bytes)) != 0) return kAclErrorRtInternal;
    c->data_capacity = bytes;
  }
  if (bytes > 0) {
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, c->data_fd, 0);
    if (m == MAP_FAILED) return kAclErrorRtInternal;
    memcpy(m, send, bytes);
    munmap(m, bytes);
  }
  me.bytes.store(bytes);
  me.posted.store(gen);
  int rc = wait_for_peers(*c, cancelled, [&] {
    for (int r = 0; r < c->n; ++r)
      if (c->ctl->slots[r].posted.load() < gen) return false;
    return true;
  });
  if (rc != kAclSuccess) return rc;
  for (int r = 0; r < c->n; ++r) {
    uint64_t len = c->ctl->slots[r].bytes.load();
    const uint8_t* src = send;
    void* m = nullptr;
    if (r != c->rank && len > 0) {
      m = mmap(nullptr, len, PROT_READ, MAP_SHARED, c->peer_fds[r], 0);
      if (m == MAP_FAILED) return kAclErrorRtInternal;
      src = static_cast<const uint8_t*>(m);
    }
    rc = place(r, src, len);
    if (m != nullptr) munmap(m, len);
    if (rc != kAclSuccess) {
      c->ctl->failed.store(c->rank + 1);
      return rc;
    }
  }
  me.done.store(gen);
  return wait_for_peers(*c, cancelled, [&] {
    for (int r = 0; r < c->n; ++r)
      if (c->ctl->slots[r].done.load() < gen) return false;
    return true;
  });
}

// NPUGATHER_FAKE_CANN_TRACE=<file>: one line per communicator init and collective,
// "<call> rank=<r> device=<d> pid=<p>", so tests can see which device each rank used.
[[maybe_unused]] void trace(const char* call, int rank) {
  std::string path = env("NPUGATHER_FAKE_CANN_TRACE");
  if (path.empty()) return;
  char line[160];
  int n = snprintf(line, sizeof(line), "%s rank=%d device=%d pid=%d\n", call, rank, current_device(),
                   static_cast<int>(getpid()));
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return;
  ssize_t written = write(fd, line, static_cast<size_t>(n));  // one append: lines never interleave
  (void)written;
  close(fd);
}

[[maybe_unused]] int check_call(CommHandle* h, void* stream) {
  if (h == nullptr || stream == nullptr) return kHcclEPtr;
  if (current_device() < 0) return kHcclERuntime;
  std::string fail_rank = env("NPUGATHER_FAKE_CANN_FAIL_RANK");
  if (!fail_rank.empty() && atoi(fail_rank.c_str()) == h->comm->rank) {
    h->comm->ctl->failed.store(h->comm->rank + 1);
    set_recent_error("simulated HCCL: injected collective failure on this rank");
    return kHcclEInternal;
  }
  trace("collective", h->comm->rank);
  return kHcclSuccess;
}

}  // namespace
}  // namespace fake_cann

using namespace fake_cann;

extern "C" {

#ifndef FAKE_CANN_COLLECTIVES_ONLY
FAKE_CANN_EXPORT int HcclGetRootInfo(void* root_info) {
  if (root_info == nullptr) return kHcclEPtr;
  if (current_device() < 0) return kHcclERuntime;
  static std::atomic<int> counter{0};
  std::random_device rd;
  char name[128];
  snprintf(name, sizeof(name), "/npgfake-%d-%d-%08x", static_cast<int>(getpid()), counter.fetch_add(1), rd());
  memset(root_info, 0, kRootInfoBytes);
  memcpy(root_info, kRootMagic, sizeof(kRootMagic));
  memcpy(static_cast<char*>(root_info) + 32, name, strlen(name) + 1);
  return kHcclSuccess;
}

FAKE_CANN_EXPORT int HcclCommInitRootInfo(uint32_t n, const void* root_info, uint32_t rank, void** comm) {
  if (root_info == nullptr || comm == nullptr) return kHcclEPtr;
  if (current_device() < 0) return kHcclERuntime;
  if (memcmp(root_info, kRootMagic, sizeof(kRootMagic)) != 0) return kHcclEPara;
  int injected = injected_init_failure(rank);
  if (injected != kHcclSuccess) return injected;
  std::string name(static_cast<const char*>(root_info) + 32);
  int result = rendezvous(name, n, rank, comm);
  if (result == kHcclSuccess) trace("HcclCommInitRootInfo", static_cast<int>(rank));
  return result;
}

FAKE_CANN_EXPORT int HcclCommInitClusterInfo(const char* cluster_info, uint32_t rank, void** comm) {
  if (cluster_info == nullptr || comm == nullptr) return kHcclEPtr;
  if (current_device() < 0) return kHcclERuntime;
  std::ifstream in(cluster_info);
  if (!in) return 10;  // HCCL_E_OPEN_FILE_FAILURE
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  uint32_t n = 0;
  for (size_t p = s.find("\"rank_id\""); p != std::string::npos; p = s.find("\"rank_id\"", p + 1)) ++n;
  int injected = injected_init_failure(rank);
  if (injected != kHcclSuccess) return injected;
  char name[64];
  snprintf(name, sizeof(name), "/npgfake-rt-%016zx", std::hash<std::string>()(std::string(cluster_info) + s));
  int result = rendezvous(name, n, rank, comm);
  if (result == kHcclSuccess) trace("HcclCommInitClusterInfo", static_cast<int>(rank));
  return result;
}

FAKE_CANN_EXPORT int HcclCommDestroy(void* comm) {
  if (comm == nullptr) return kHcclEPtr;
  CommHandle* h = static_cast<CommHandle*>(comm);
  h->comm->cancelled.store(true);
  delete h;
  return kHcclSuccess;
}

#endif  // FAKE_CANN_COLLECTIVES_ONLY

#ifndef FAKE_CANN_COMM_MANAGEMENT_ONLY
FAKE_CANN_EXPORT int HcclAllGather(void* send, void* recv, uint64_t count, int dtype, void* comm, void* stream) {
  CommHandle* h = static_cast<CommHandle*>(comm);
  int rc = check_call(h, stream);
  if (rc != kHcclSuccess) return rc;
  const int w = width_of(dtype);
  if (w == 0) return kHcclEPara;
  const uint64_t bytes = count * w;
  std::shared_ptr<Comm> c = h->comm;
  if (!is_device_range(send, bytes) || !is_device_range(recv, bytes * c->n)) return kHcclEPtr;
  const uint64_t gen = ++c->generation;
  uint8_t* out = static_cast<uint8_t*>(recv);
  const uint8_t* in = static_cast<const uint8_t*>(send);
  enqueue(stream, [c, gen, in, out, bytes](const std::atomic<bool>& cancelled) {
    return gather_task(c, gen, in, bytes, cancelled, [&](int r, const uint8_t* src, uint64_t len) {
      if (len != bytes) return kAclErrorRtInternal;  // ranks disagree on the count
      memmove(out + r * bytes, src, len);
      return kAclSuccess;
    });
  });
  return kHcclSuccess;
}

#ifndef FAKE_CANN_MINIMAL
FAKE_CANN_EXPORT int HcclAllGatherV(void* send, uint64_t send_count, void* recv, const void* recv_counts,
                                    const void* recv_displs, int dtype, void* comm, void* stream) {
  CommHandle* h = static_cast<CommHandle*>(comm);
  int rc = check_call(h, stream);
  if (rc != kHcclSuccess) return rc;
  const int w = width_of(dtype);
  if (w == 0 || recv_counts == nullptr || recv_displs == nullptr) return kHcclEPara;
  std::shared_ptr<Comm> c = h->comm;
  std::vector<uint64_t> counts(static_cast<const uint64_t*>(recv_counts), static_cast<const uint64_t*>(recv_counts) + c->n);
  std::vector<uint64_t> displs(static_cast<const uint64_t*>(recv_displs), static_cast<const uint64_t*>(recv_displs) + c->n);
  if (send_count != counts[c->rank]) return kHcclEPara;
  if (send_count > 0 && !is_device_range(send, send_count * w)) return kHcclEPtr;
  for (int r = 0; r < c->n; ++r)
    if (counts[r] > 0 && !is_device_range(static_cast<uint8_t*>(recv) + displs[r] * w, counts[r] * w)) return kHcclEPtr;
  const uint64_t gen = ++c->generation;
  ++g_all_gather_v_calls;
  uint8_t* out = static_cast<uint8_t*>(recv);
  const uint8_t* in = static_cast<const uint8_t*>(send);
  enqueue(stream, [c, gen, in, out, send_count, w, counts, displs](const std::atomic<bool>& cancelled) {
    return gather_task(c, gen, in, send_count * w, cancelled, [&](int r, const uint8_t* src, uint64_t len) {
      if (len != counts[r] * w) return kAclErrorRtInternal;
      memmove(out + displs[r] * w, src, len);
      return kAclSuccess;
    });
  });
  return kHcclSuccess;
}

#endif  // FAKE_CANN_MINIMAL
#endif  // FAKE_CANN_COMM_MANAGEMENT_ONLY

#if !defined(FAKE_CANN_MINIMAL) && !defined(FAKE_CANN_COLLECTIVES_ONLY)
FAKE_CANN_EXPORT const char* HcclGetErrorString(int code) {
  static thread_local std::string text;
  text = "simulated HCCL error code " + std::to_string(code);
  return text.c_str();
}
#endif

FAKE_CANN_EXPORT int HcclGetRankSize(void* comm, uint32_t* size) {
  *size = static_cast<uint32_t>(static_cast<CommHandle*>(comm)->comm->n);
  return kHcclSuccess;
}

FAKE_CANN_EXPORT int HcclGetRankId(void* comm, uint32_t* rank) {
  *rank = static_cast<uint32_t>(static_cast<CommHandle*>(comm)->comm->rank);
  return kHcclSuccess;
}

FAKE_CANN_EXPORT int npgFakeCannAllGatherVCalls() { return g_all_gather_v_calls.load(); }

}  // extern "C"
