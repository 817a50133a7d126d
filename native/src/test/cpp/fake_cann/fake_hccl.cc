// Simulated libhccl.so over the shared engine of fake_collective.h: the control block is named
// in the root info (or derived from the rank table file). Test-only; see fake_cann.h.
#include <stdio.h>

#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "fake_collective.h"

namespace fake_cann {
namespace {

constexpr char kRootMagic[] = "NPGFAKEHCCL1";
constexpr size_t kRootInfoBytes = 4108;
// SYS_MAX_COUNT of hicann/hccl src/common/hccl_common.h, checked by every collective.
constexpr uint64_t kSysMaxCount = 0x7FFFFFFFF;
constexpr Vendor kHccl = {"simulated HCCL", kHcclSuccess,  kHcclEPara,    kHcclEPtr,
                          kHcclEInternal,   kHcclETimeout, kHcclERuntime, kSysMaxCount};

std::atomic<int> g_all_gather_v_calls{0};
std::atomic<int> g_all_gather_v_refusals{0};

#if !defined(FAKE_CANN_MINIMAL) && !defined(FAKE_CANN_COMM_MANAGEMENT_ONLY)
// HcclAllGatherV's topology rule (HCCL's HcclAllGatherV doc): Atlas A3 and 300I Duo on one
// server only, Atlas A2 only with as many ranks on every server, Ascend 950 always, the Atlas
// training series never. The servers come from NPUGATHER_FAKE_CANN_SERVERS.
bool all_gather_v_supported(int n) {
  std::map<int, int> ranks_per_server;
  const std::string servers = env("NPUGATHER_FAKE_CANN_SERVERS");
  size_t at = 0;
  for (int r = 0; r < n; ++r) {
    int server = 0;
    if (at < servers.size()) {
      server = atoi(servers.c_str() + at);
      size_t comma = servers.find(',', at);
      at = comma == std::string::npos ? servers.size() : comma + 1;
    }
    ++ranks_per_server[server];
  }
  const char* soc_env = getenv("NPUGATHER_FAKE_CANN_SOC");
  const std::string soc = soc_env != nullptr ? soc_env : "Ascend910B1";
  auto starts = [&soc](const char* p) { return soc.rfind(p, 0) == 0; };
  if (starts("Ascend950")) return true;
  if (starts("Ascend910_93") || starts("Ascend310P")) return ranks_per_server.size() == 1;
  if (starts("Ascend910B")) {
    for (const auto& e : ranks_per_server)
      if (e.second != ranks_per_server.begin()->second) return false;
    return true;
  }
  return false;
}
#endif

}  // namespace
}  // namespace fake_cann

using namespace fake_cann;

extern "C" {

#ifndef FAKE_CANN_COLLECTIVES_ONLY
FAKE_CANN_EXPORT int HcclGetRootInfo(void* root_info) {
  latch_hccl_env();
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
  latch_hccl_env();
  if (root_info == nullptr || comm == nullptr) return kHcclEPtr;
  if (current_device() < 0) return kHcclERuntime;
  if (memcmp(root_info, kRootMagic, sizeof(kRootMagic)) != 0) return kHcclEPara;
  std::string name(static_cast<const char*>(root_info) + 32);
  {
    static std::mutex mutex;
    static std::map<std::string, int>* attempts = new std::map<std::string, int>();
    std::unique_lock<std::mutex> lock(mutex);
    if (++(*attempts)[name + "#" + std::to_string(rank)] > 1) {
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(connect_timeout_ms()));
      set_recent_error(
          "simulated HCCL: the root's topology detection of this root info was erased after the "
          "first HcclCommInitRootInfo attempt: timed out waiting for it");
      return kHcclETimeout;
    }
  }
  int injected = injected_init_failure(kHccl, name, rank);
  if (injected != kHcclSuccess) return injected;
  return rendezvous(kHccl, name, n, rank, comm);
}

FAKE_CANN_EXPORT int HcclCommInitClusterInfo(const char* cluster_info, uint32_t rank, void** comm) {
  latch_hccl_env();
  if (cluster_info == nullptr || comm == nullptr) return kHcclEPtr;
  if (current_device() < 0) return kHcclERuntime;
  std::ifstream in(cluster_info);
  if (!in) return 10;  // HCCL_E_OPEN_FILE_FAILURE
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  uint32_t n = 0;
  for (size_t p = s.find("\"rank_id\""); p != std::string::npos; p = s.find("\"rank_id\"", p + 1)) ++n;
  char name[64];
  snprintf(name, sizeof(name), "/npgfake-rt-%016zx", std::hash<std::string>()(std::string(cluster_info) + s));
  int injected = injected_init_failure(kHccl, name, rank);
  if (injected != kHcclSuccess) return injected;
  return rendezvous(kHccl, name, n, rank, comm);
}

// HCOMM's HcclCommDestroy returns HCCL_E_AGAIN while an operation of the communicator is in
// flight: the caller must first end it (the stream force-destroyed, or the op finished).
FAKE_CANN_EXPORT int HcclCommDestroy(void* comm) {
  if (comm != nullptr && static_cast<CommHandle*>(comm)->comm->in_flight.load() > 0) {
    set_recent_error("simulated HCCL: HcclCommDestroy: an operation of the communicator is still in flight");
    return kHcclEAgain;
  }
  return destroy_comm(kHccl, comm);
}

#endif  // FAKE_CANN_COLLECTIVES_ONLY

#ifndef FAKE_CANN_COMM_MANAGEMENT_ONLY
FAKE_CANN_EXPORT int HcclAllGather(void* send, void* recv, uint64_t count, int dtype, void* comm, void* stream) {
  latch_hccl_env();
  return enqueue_all_gather(kHccl, comm, send, recv, count, dtype, stream);
}

#ifndef FAKE_CANN_MINIMAL
FAKE_CANN_EXPORT int HcclAllGatherV(void* send, uint64_t send_count, void* recv, const void* recv_counts,
                                    const void* recv_displs, int dtype, void* comm, void* stream) {
  CommHandle* h = static_cast<CommHandle*>(comm);
  int rc = check_call(kHccl, h, stream);
  if (rc != kHcclSuccess) return rc;
  if (send_count > kSysMaxCount) {
    set_recent_error("simulated HCCL: sendCount is invalid (bigger than MAX count)");
    return kHcclEPara;
  }
  const int w = width_of(dtype);
  if (w == 0 || recv_counts == nullptr || recv_displs == nullptr) return kHcclEPara;
  std::shared_ptr<Comm> c = h->comm;
  if (!all_gather_v_supported(c->n)) {
    ++g_all_gather_v_refusals;
    set_recent_error("simulated HCCL: HcclAllGatherV is not supported in this topology");
    return kHcclENotSupport;
  }
  std::vector<uint64_t> counts(static_cast<const uint64_t*>(recv_counts),
                               static_cast<const uint64_t*>(recv_counts) + c->n);
  std::vector<uint64_t> displs(static_cast<const uint64_t*>(recv_displs),
                               static_cast<const uint64_t*>(recv_displs) + c->n);
  if (send_count != counts[c->rank]) return kHcclEPara;
  if (send_count > 0 && !is_device_range(send, send_count * w)) return kHcclEPtr;
  for (int r = 0; r < c->n; ++r)
    if (counts[r] > 0 && !is_device_range(static_cast<uint8_t*>(recv) + displs[r] * w, counts[r] * w)) return kHcclEPtr;
  const uint64_t gen = ++c->generation;
  ++g_all_gather_v_calls;
  uint8_t* out = static_cast<uint8_t*>(recv);
  const uint8_t* in = static_cast<const uint8_t*>(send);
  auto flight = std::make_shared<InFlight>(c);
  enqueue(stream, [c, gen, in, out, send_count, w, counts, displs, flight](const std::atomic<bool>& cancelled) {
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
FAKE_CANN_EXPORT int npgFakeCannAllGatherVRefusals() { return g_all_gather_v_refusals.load(); }

}  // extern "C"
