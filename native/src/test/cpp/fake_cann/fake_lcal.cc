// Simulated liblcal.so (ATB's LCCL) over the shared engine of fake_collective.h, with ATB's
// bootstrap behaviour (src/kernels/lcal/src/lcal_wrap.cpp, tools/socket/lcal_sock_exchange.cpp):
//   - a domain init meets on "port" 10067 + domain of this host (an abstract Unix socket stands
//     in for 127.0.0.1:port): rank 0 binds it for the length of the init (taken: LCAL_ERROR_INTERNAL),
//     the other ranks connect to whoever holds it and send their rank (a rank seen twice:
//     LCAL_ERROR_INTERNAL), so two communicators of one domain at once collide as in LCCL;
//   - LcalGetUniqueId never writes the caller's buffer; LcalCommInitRank with a zeroed id falls back
//     to the bootstrap of domain 0, and with any other id fails on every rank but 0;
//   - LcclAllGather has kernels only for INT8, INT16, INT32, INT64, FP16, FP32 and BF16
//     (RegistCCLOp2Kernel in lcal_internal.cpp): another type fails with LCAL_ERROR_MKIRT on two
//     ranks or more (one rank is a plain copy).
//   - a thread uid meets in this process, and its devices are remembered for good
//     (LcalComm::GetDevThread): a reused uid takes the earlier communicator's devices.
// Test-only; see fake_cann.h.
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <functional>
#include <map>
#include <random>

#include "fake_collective.h"

namespace fake_cann {
namespace {

constexpr size_t kUniqueIdBytes = 128;
constexpr int kLcalSuccess = 0;
constexpr int kLcalErrorMkirt = -2;
constexpr int kLcalErrorParaCheckFail = -3;
constexpr int kLcalErrorInternal = -4;
constexpr int kLcalErrorTimeout = -5;
constexpr int kLcalErrorOutOfMemory = -6;
constexpr int kLcalMinBufferMb = 200;
constexpr int64_t kMiB = 1 << 20;
constexpr int64_t kLcalFlagBufferBytes = 4 * kMiB;  // LCAL_FLAG_BUFF_BYTES
constexpr int kLcalDefaultPort = 10067;
constexpr size_t kNameBytes = 96;
constexpr Vendor kLcal = {"simulated LCAL",   kLcalSuccess,      kLcalErrorParaCheckFail, kLcalErrorParaCheckFail,
                          kLcalErrorInternal, kLcalErrorTimeout, kLcalErrorMkirt,         UINT64_MAX};

struct UniqueId {
  char internal[kUniqueIdBytes];
};

int lcal_fail(int code, const std::string& text) {
  set_recent_error(("simulated LCAL: " + text).c_str());
  return code;
}

bool registered_all_gather_type(int dtype) {
  switch (dtype) {
    case 0:
    case 1:
    case 2:
    case 3:
    case 4:
    case 5:
    case 11:
      return true;  // INT8 INT16 INT32 FP16 FP32 INT64 BFP16
  }
  return false;
}

// The stand-in for 127.0.0.1:port: an abstract Unix socket, host-wide like a TCP port and gone
// with its process.
sockaddr_un port_address(int port, socklen_t* length) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const int n = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "npgfake-lcal-port-%d", port);
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

int64_t remaining_ms(std::chrono::steady_clock::time_point deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
}

bool wait_readable(int fd, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const int64_t left = remaining_ms(deadline);
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    int rc = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 100)));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return false;
  }
}

bool read_exact(int fd, void* out, size_t bytes, std::chrono::steady_clock::time_point deadline) {
  uint8_t* p = static_cast<uint8_t*>(out);
  while (bytes > 0) {
    if (!wait_readable(fd, deadline)) return false;
    ssize_t got = recv(fd, p, bytes, 0);
    if (got <= 0) return false;
    p += got;
    bytes -= static_cast<size_t>(got);
  }
  return true;
}

struct Fds {
  std::vector<int> fds;
  ~Fds() {
    for (int fd : fds) ::close(fd);
  }
};

// LCCL's socket bootstrap on port, then the shared engine's rendezvous under the name rank 0
// hands out. The port stays bound until the init ends, as in LcalComm::Init.
int domain_init(int port, int rank_size, int rank, void** comm) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(connect_timeout_ms());
  socklen_t length = 0;
  const sockaddr_un address = port_address(port, &length);
  Fds held;
  char name[kNameBytes] = {};
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return lcal_fail(kLcalErrorInternal, "socket failed");
  held.fds.push_back(fd);
  if (rank == 0) {
    if (bind(fd, reinterpret_cast<const sockaddr*>(&address), length) != 0 || listen(fd, 128) != 0) {
      return lcal_fail(kLcalErrorInternal, "Server side bind " + std::to_string(port) + " failed");
    }
    std::vector<int> clients(rank_size, -1);
    for (int i = 1; i < rank_size; ++i) {
      if (!wait_readable(fd, deadline)) return lcal_fail(kLcalErrorTimeout, "not every rank connected");
      const int client = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) return lcal_fail(kLcalErrorInternal, "Server side accept failed");
      held.fds.push_back(client);
      int32_t peer = -1;
      if (!read_exact(client, &peer, sizeof(peer), deadline)) {
        return lcal_fail(kLcalErrorInternal, "Server side recv rank id failed");
      }
      if (peer <= 0 || peer >= rank_size || clients[peer] >= 0) {
        return lcal_fail(kLcalErrorInternal, "Server side recv invalid rank id " + std::to_string(peer));
      }
      clients[peer] = client;
    }
    std::random_device rd;
    snprintf(name, sizeof(name), "/npgfake-%d-lcaldom%d-%08x", static_cast<int>(getpid()), port, rd());
    for (int i = 1; i < rank_size; ++i) {
      if (send(clients[i], name, sizeof(name), MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(name))) {
        return lcal_fail(kLcalErrorInternal, "Server side send failed");
      }
    }
  } else {
    while (connect(fd, reinterpret_cast<const sockaddr*>(&address), length) != 0) {
      if (errno != ECONNREFUSED && errno != ENOENT && errno != EAGAIN && errno != EINTR) {
        return lcal_fail(kLcalErrorInternal, "Client side connect failed");
      }
      if (remaining_ms(deadline) <= 0) return lcal_fail(kLcalErrorTimeout, "Client side connect timed out");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const int32_t mine = rank;
    if (send(fd, &mine, sizeof(mine), MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(mine)) ||
        !read_exact(fd, name, sizeof(name), deadline)) {
      return lcal_fail(kLcalErrorInternal, "Client side " + std::to_string(rank) + " recv buffer failed");
    }
    name[kNameBytes - 1] = '\0';
  }
  return rendezvous(kLcal, name, static_cast<uint32_t>(rank_size), static_cast<uint32_t>(rank), comm);
}

int check_init(int rank_size, int rank, void** comm) {
  if (comm == nullptr || rank_size <= 0 || rank < 0 || rank >= rank_size) return kLcalErrorParaCheckFail;
  if (current_device() < 0) return kLcalErrorMkirt;
  return kLcalSuccess;
}

}  // namespace
}  // namespace fake_cann

using namespace fake_cann;

extern "C" {

// ATB passes the pointer variable itself as the bootstrap handle: the caller's id stays as it was.
FAKE_CANN_EXPORT int LcalGetUniqueId(UniqueId* unique_id, int comm_domain) {
  if (unique_id == nullptr || comm_domain < 0) return kLcalErrorInternal;
  if (current_device() < 0) return kLcalErrorInternal;
  return kLcalSuccess;
}

FAKE_CANN_EXPORT int LcalCommInitRank(UniqueId comm_id, int rank_size, int rank, void** comm) {
  int rc = check_init(rank_size, rank, comm);
  if (rc != kLcalSuccess) return rc;
  bool zero = true;
  for (char c : comm_id.internal) zero = zero && c == 0;
  if (!zero && rank != 0) return lcal_fail(kLcalErrorInternal, "Multi-machine is not supported at the moment");
  const std::string port = "lcal-port-" + std::to_string(kLcalDefaultPort);
  int injected = injected_init_failure(kLcal, port, static_cast<uint32_t>(rank));
  if (injected != kLcalSuccess) return injected;
  return domain_init(kLcalDefaultPort, rank_size, rank, comm);
}

FAKE_CANN_EXPORT int LcalCommInitRankWithCustDomainSize(int comm_domain, int buffer_mb, int rank_size, int rank,
                                                        void** comm, bool) {
  if (buffer_mb < kLcalMinBufferMb || comm_domain < 0 || comm_domain > 65535) {
    return lcal_fail(kLcalErrorInternal, "lcal comm buffer size should not be less than 200 MBytes");
  }
  // LcalComm::InitMem sizes the buffer in a 32-bit int: past 2043 MiB it wraps, and aclrtMalloc
  // of the negative (as size_t, huge) or zero size fails. 4093..4295 wrap to a small buffer the
  // real init accepts and the kernels overrun.
  const int32_t buffer_bytes =
      static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(buffer_mb) * kMiB + kLcalFlagBufferBytes));
  if (buffer_bytes <= 0) {
    return lcal_fail(kLcalErrorOutOfMemory,
                     "allocate device mem error (lcal buffer size " + std::to_string(buffer_bytes) + ")");
  }
  int rc = check_init(rank_size, rank, comm);
  if (rc != kLcalSuccess) return rc;
  const int port = (kLcalDefaultPort + comm_domain) & 0xffff;  // LCCL's port is 16 bits
  int injected = injected_init_failure(kLcal, "lcal-port-" + std::to_string(port), static_cast<uint32_t>(rank));
  if (injected != kLcalSuccess) return injected;
  return domain_init(port, rank_size, rank, comm);
}

FAKE_CANN_EXPORT int LcalCommInitRankWithDomain(int comm_domain, int rank_size, int rank, void** comm) {
  return LcalCommInitRankWithCustDomainSize(comm_domain, kLcalMinBufferMb, rank_size, rank, comm, false);
}

// As ATB's LcalComm::GetDevThread: the devices of a uid are recorded in a process-wide table
// that is never cleared, and a uid seen before takes the devices recorded there instead of
// waiting for its ranks'. A communicator whose ranks now run on other devices than recorded
// "maps the wrong peers' memory": its collectives fail on the stream with
// ACL_ERROR_RT_AICORE_EXCEPTION on the ranks that read a stale device (on a device, at best).
FAKE_CANN_EXPORT int LcalCommInitThread(int rank, int rank_size, const char* uid, void** comm) {
  if (uid == nullptr) return kLcalErrorParaCheckFail;
  int rc = check_init(rank_size, rank, comm);
  if (rc != kLcalSuccess) return rc;
  static std::mutex dev_mutex;
  static std::map<std::string, std::vector<int>>* dev_lists = new std::map<std::string, std::vector<int>>();
  std::vector<int> recorded;  // what this rank reads for its peers; -1: not yet, waited for
  {
    std::lock_guard<std::mutex> lock(dev_mutex);
    std::vector<int>& list = (*dev_lists)[uid];
    if (!list.empty()) recorded = list;
    if (list.size() < static_cast<size_t>(rank_size)) list.resize(rank_size, -1);
    list[rank] = current_device();
  }
  char name[96];
  snprintf(name, sizeof(name), "/npgfake-%d-lcalthr-%016zx", static_cast<int>(getpid()), std::hash<std::string>()(uid));
  int injected = injected_init_failure(kLcal, name, static_cast<uint32_t>(rank));
  if (injected != kLcalSuccess) return injected;
  rc = rendezvous(kLcal, name, static_cast<uint32_t>(rank_size), static_cast<uint32_t>(rank), comm);
  if (rc != kLcalSuccess || recorded.empty()) return rc;
  Comm& c = *static_cast<CommHandle*>(*comm)->comm;
  for (int r = 0; r < rank_size; ++r) {
    if (r != rank && r < static_cast<int>(recorded.size()) && recorded[r] >= 0 &&
        recorded[r] != c.ctl->slots[r].device.load()) {
      c.stale_devices = true;
    }
  }
  return rc;
}

FAKE_CANN_EXPORT int LcclAllGather(void* send, void* recv, int64_t count, int dtype, void* comm, void* stream) {
  if (count < 0) return kLcalErrorParaCheckFail;
  CommHandle* h = static_cast<CommHandle*>(comm);
  if (h != nullptr && h->comm->n >= 2 && !registered_all_gather_type(dtype)) {
    return lcal_fail(kLcalErrorMkirt, "AsdRtFunctionLaunch -:LcclAllGather: no kernel registered for HcclDataType " +
                                          std::to_string(dtype));
  }
  int rc = enqueue_all_gather(kLcal, comm, send, recv, static_cast<uint64_t>(count), dtype, stream);
  if (rc == kLcalSuccess && h->comm->stale_devices) {  // the peers' data moved, from the wrong devices' memory
    enqueue(stream, [](const std::atomic<bool>&) { return kAclErrorRtAicoreException; });
  }
  return rc;
}

FAKE_CANN_EXPORT int LcclCommDestroy(void* comm) { return destroy_comm(kLcal, comm); }

}  // extern "C"
