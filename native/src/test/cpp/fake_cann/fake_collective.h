// The collective engine shared by the simulated libhccl.so and liblcal.so (test-only; see
// fake_cann.h): ranks rendezvous through a POSIX shared-memory control block with a name both
// sides derive (from a root info, a domain or a uid), and every collective really moves each
// rank's bytes to every other rank through per-rank shared-memory data segments, between
// threads and between processes. Fault switches as in fake_cann.h.
#ifndef NPUGATHER_TEST_FAKE_COLLECTIVE_H_
#define NPUGATHER_TEST_FAKE_COLLECTIVE_H_

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fake_cann.h"

namespace fake_cann {

// A simulated vendor library's result codes and name, for the shared code below.
struct Vendor {
  const char* name;  // "simulated HCCL", prefix of its recent-error texts
  int success;
  int para;
  int ptr;
  int internal;
  int timeout;
  int runtime;
  uint64_t max_count;  // more elements per rank in one call is para (HCCL's SYS_MAX_COUNT)
};

constexpr int kMaxRanks = 64;

struct alignas(64) Slot {
  std::atomic<uint64_t> posted;  // generation whose data is in the rank's data segment
  std::atomic<uint64_t> done;    // generation the rank finished reading
  std::atomic<uint64_t> bytes;
  std::atomic<int32_t> pid;
  std::atomic<int32_t> device;  // the device the rank's thread had set at init
};

struct Control {
  std::atomic<int32_t> n;
  std::atomic<int32_t> joined;
  std::atomic<int32_t> ready;
  std::atomic<int32_t> failed;  // 1 + the rank whose collective failed, 0 when none
  Slot slots[kMaxRanks];
};

inline std::mutex g_attempts_mutex;
// Failed init attempts per communicator (its rendezvous name) and rank.
inline std::map<std::string, int>* g_init_attempts = new std::map<std::string, int>();

inline std::string env(const char* name) {
  const char* v = getenv(name);
  return v ? std::string(v) : std::string();
}

inline int64_t connect_timeout_ms() {
  std::string v = env("NPUGATHER_FAKE_CANN_CONNECT_TIMEOUT_MS");
  if (!v.empty()) return atoll(v.c_str());
  v = env("HCCL_CONNECT_TIMEOUT");
  return (v.empty() ? 120 : atoll(v.c_str())) * 1000;
}

inline int width_of(int dtype) {
  switch (dtype) {
    case 0:
    case 7:
    case 14:
    case 15:
    case 16:
    case 17:
      return 1;
    case 1:
    case 3:
    case 8:
    case 11:
      return 2;
    case 2:
    case 4:
    case 9:
      return 4;
    case 5:
    case 6:
    case 10:
      return 8;
    case 12:
      return 16;
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
  std::atomic<int> in_call{0};  // threads inside an operation call (HcclAllGather ...) on it
  bool stale_devices = false;   // LCAL thread mode: peers' devices from an earlier communicator

  ~Comm() {
    if (ctl != nullptr) munmap(ctl, sizeof(Control));
    if (data_fd >= 0) ::close(data_fd);
    for (int fd : peer_fds)
      if (fd >= 0) ::close(fd);
    count_comms(-1);
  }
};

// The handle the library hands out; the state lives on while a queued task still needs it.
struct CommHandle {
  std::shared_ptr<Comm> comm;
};

// Held for the length of an operation call (not of its work on the stream): as HCOMM's
// StateGuard keeps the communicator INUSE. NPUGATHER_FAKE_CANN_OP_CALL_MS makes the call stay
// inside that long first, as HCCL's first call on a communicator does while it sets up links.
struct InCall {
  std::shared_ptr<Comm> comm;
  explicit InCall(const CommHandle* h) : comm(h != nullptr ? h->comm : nullptr) {
    if (!comm) return;
    comm->in_call.fetch_add(1);
    const std::string dwell = env("NPUGATHER_FAKE_CANN_OP_CALL_MS");
    if (!dwell.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(atoll(dwell.c_str())));
  }
  InCall(const InCall&) = delete;
  InCall& operator=(const InCall&) = delete;
  ~InCall() {
    if (comm) comm->in_call.fetch_sub(1);
  }
};

inline std::string data_name(const std::string& name, int rank) { return name + "-d" + std::to_string(rank); }

inline bool peer_dead(const Comm& c) {
  for (int r = 0; r < c.n; ++r) {
    int32_t pid = c.ctl->slots[r].pid.load();
    if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) return true;
  }
  return false;
}

// Waits until pred() holds; 0, or the stream error that ended the wait.
template <typename Pred>
inline int wait_for_peers(const Comm& c, const std::atomic<bool>& cancelled, Pred pred) {
  for (int spins = 0;; ++spins) {
    if (pred()) return kAclSuccess;
    if (cancelled.load() || c.cancelled.load()) return kAclErrorRtDeviceTaskAbort;
    if (c.ctl->failed.load() != 0) return kAclErrorRtSuspectRemoteError;
    if (spins % 1000 == 999 && peer_dead(c)) return kAclErrorRtSuspectRemoteError;
    if (spins < 100)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// NPUGATHER_FAKE_CANN_TRACE=<file>: one line per communicator init and collective,
// "<call> rank=<r> device=<d> pid=<p>", so tests can see which device each rank used.
inline void trace(const char* call, int rank) {
  std::string path = env("NPUGATHER_FAKE_CANN_TRACE");
  if (path.empty()) return;
  char line[160];
  int n = snprintf(line, sizeof(line), "%s rank=%d device=%d pid=%d\n", call, rank, current_device(),
                   static_cast<int>(getpid()));
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return;
  ssize_t written = write(fd, line, static_cast<size_t>(n));  // one append: lines never interleave
  (void)written;
  ::close(fd);
}

inline int rendezvous(const Vendor& v, const std::string& name, uint32_t n, uint32_t rank, void** out) {
  if (n == 0 || n > kMaxRanks || rank >= n) return v.para;
  int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) return v.internal;
  struct stat st;
  if (fstat(fd, &st) != 0 ||
      (st.st_size < static_cast<off_t>(sizeof(Control)) && ftruncate(fd, sizeof(Control)) != 0)) {
    ::close(fd);
    return v.internal;
  }
  void* map = mmap(nullptr, sizeof(Control), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return v.internal;
  auto comm = std::make_shared<Comm>();
  count_comms(1);
  comm->name = name;
  comm->rank = static_cast<int32_t>(rank);
  comm->n = static_cast<int32_t>(n);
  comm->ctl = static_cast<Control*>(map);
  Control* ctl = comm->ctl;
  comm->data_fd = shm_open(data_name(name, rank).c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
  if (comm->data_fd < 0) return v.internal;
  int32_t expected = 0;
  if (!ctl->n.compare_exchange_strong(expected, static_cast<int32_t>(n)) && expected != static_cast<int32_t>(n)) {
    shm_unlink(data_name(name, rank).c_str());
    return v.para;
  }
  ctl->slots[rank].pid.store(getpid());
  ctl->slots[rank].device.store(current_device());
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
    set_recent_error((std::string(v.name) + ": not every rank joined within the connect timeout").c_str());
    return v.timeout;
  }
  comm->peer_fds.assign(n, -1);
  for (uint32_t r = 0; r < n; ++r) {
    comm->peer_fds[r] = shm_open(data_name(name, r).c_str(), O_RDONLY, 0);
    if (comm->peer_fds[r] < 0) return v.internal;
  }
  ctl->ready.fetch_add(1);
  if (!wait_count(ctl->ready)) {
    shm_unlink(data_name(name, rank).c_str());
    shm_unlink(name.c_str());
    return v.timeout;
  }
  // Everyone has everything open: no names stay behind.
  shm_unlink(data_name(name, rank).c_str());
  shm_unlink(name.c_str());
  *out = new CommHandle{comm};
  trace("init", static_cast<int>(rank));
  return v.success;
}

// The injected init failure of rank of the communicator named name, if any.
inline int injected_init_failure(const Vendor& v, const std::string& name, uint32_t rank) {
  std::string code = env("NPUGATHER_FAKE_CANN_INIT_FAIL");
  if (code.empty()) return v.success;
  std::string only = env("NPUGATHER_FAKE_CANN_INIT_FAIL_RANK");
  if (!only.empty() && atoi(only.c_str()) != static_cast<int>(rank)) return v.success;
  std::string times = env("NPUGATHER_FAKE_CANN_INIT_FAIL_TIMES");
  if (!times.empty()) {
    std::lock_guard<std::mutex> lock(g_attempts_mutex);
    int& attempts = (*g_init_attempts)[name + "#" + std::to_string(rank)];
    if (attempts >= atoi(times.c_str())) return v.success;
    ++attempts;
  }
  const std::string message = env("NPUGATHER_FAKE_CANN_INIT_FAIL_MESSAGE");
  set_recent_error((std::string(v.name) + ": " + (message.empty() ? "injected init failure" : message)).c_str());
  return atoi(code.c_str());
}

// Copies this rank's block out and every rank's block in; place(r, src, bytes) stores rank r's block.
template <typename Place>
inline int gather_task(const std::shared_ptr<Comm>& c, uint64_t gen, const uint8_t* send, uint64_t bytes,
                       const std::atomic<bool>& cancelled, Place place) {
  if (env("NPUGATHER_FAKE_CANN_HANG") == "allgather") {
    while (!cancelled.load() && !c->cancelled.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return kAclErrorRtDeviceTaskAbort;
  }
  const std::string slow = env("NPUGATHER_FAKE_CANN_COLLECTIVE_MS");
  if (!slow.empty()) {  // a long collective, as a large one on a device
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(atoll(slow.c_str()));
    while (std::chrono::steady_clock::now() < until) {
      if (cancelled.load() || c->cancelled.load()) return kAclErrorRtDeviceTaskAbort;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
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

inline int check_call(const Vendor& v, CommHandle* h, void* stream) {
  if (h == nullptr || stream == nullptr) return v.ptr;
  if (current_device() < 0) return v.runtime;
  std::string fail_rank = env("NPUGATHER_FAKE_CANN_FAIL_RANK");
  if (!fail_rank.empty() && atoi(fail_rank.c_str()) == h->comm->rank) {
    h->comm->ctl->failed.store(h->comm->rank + 1);
    set_recent_error((std::string(v.name) + ": injected collective failure on this rank").c_str());
    return v.internal;
  }
  trace("collective", h->comm->rank);
  return v.success;
}

// An all-gather of count elements per rank, enqueued on stream.
inline int enqueue_all_gather(const Vendor& v, void* comm, void* send, void* recv, uint64_t count, int dtype,
                              void* stream) {
  CommHandle* h = static_cast<CommHandle*>(comm);
  int rc = check_call(v, h, stream);
  if (rc != v.success) return rc;
  if (count > v.max_count) {
    set_recent_error((std::string(v.name) + ": count[" + std::to_string(count) +
                      "] is invalid (bigger than MAX count[" + std::to_string(v.max_count) + "])")
                         .c_str());
    return v.para;
  }
  const int w = width_of(dtype);
  if (w == 0) return v.para;
  const uint64_t bytes = count * w;
  std::shared_ptr<Comm> c = h->comm;
  if (!is_device_range(send, bytes) || !is_device_range(recv, bytes * c->n)) return v.ptr;
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
  return v.success;
}

// Cancels the communicator's queued work; the state goes when the last task lets go of it.
// HCCL refuses instead while another thread is inside an operation call (see fake_hccl.cc).
inline int destroy_comm(const Vendor& v, void* comm) {
  if (comm == nullptr) return v.ptr;
  CommHandle* h = static_cast<CommHandle*>(comm);
  h->comm->cancelled.store(true);
  delete h;
  return v.success;
}

}  // namespace fake_cann

#endif  // NPUGATHER_TEST_FAKE_COLLECTIVE_H_
