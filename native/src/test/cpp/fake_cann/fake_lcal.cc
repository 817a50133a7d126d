// Simulated liblcal.so (ATB's LCCL) over the shared engine of fake_collective.h. The control
// block is named after what LCCL's bootstrap would meet on: the unique id's name (root side),
// the commDomain (host-wide, like LCCL's port 10067 + domain) or the thread uid (this process).
// Test-only; see fake_cann.h.
#include <stdio.h>

#include <functional>
#include <random>

#include "fake_collective.h"

namespace fake_cann {
namespace {

constexpr char kUniqueIdMagic[] = "NPGFAKELCAL1";
constexpr size_t kUniqueIdBytes = 128;
constexpr int kLcalSuccess = 0;
constexpr int kLcalErrorMkirt = -2;
constexpr int kLcalErrorParaCheckFail = -3;
constexpr int kLcalErrorInternal = -4;
constexpr int kLcalErrorTimeout = -5;
constexpr int kLcalMinBufferMb = 200;
constexpr Vendor kLcal = {"simulated LCAL", kLcalSuccess, kLcalErrorParaCheckFail, kLcalErrorParaCheckFail,
                          kLcalErrorInternal, kLcalErrorTimeout, kLcalErrorMkirt};

struct UniqueId {
  char internal[kUniqueIdBytes];
};

int init(const std::string& name, int rank_size, int rank, void** comm) {
  if (comm == nullptr || rank_size <= 0 || rank < 0 || rank >= rank_size) return kLcalErrorParaCheckFail;
  if (current_device() < 0) return kLcalErrorMkirt;
  int injected = injected_init_failure(kLcal, name, static_cast<uint32_t>(rank));
  if (injected != kLcalSuccess) return injected;
  return rendezvous(kLcal, name, static_cast<uint32_t>(rank_size), static_cast<uint32_t>(rank), comm);
}

}  // namespace
}  // namespace fake_cann

using namespace fake_cann;

extern "C" {

FAKE_CANN_EXPORT int LcalGetUniqueId(UniqueId* unique_id, int comm_domain) {
  if (unique_id == nullptr || comm_domain < 0) return kLcalErrorInternal;
  if (current_device() < 0) return kLcalErrorInternal;
  static std::atomic<int> counter{0};
  std::random_device rd;
  char name[96];
  snprintf(name, sizeof(name), "/npgfake-%d-lcal%d-%08x", static_cast<int>(getpid()), counter.fetch_add(1), rd());
  memset(unique_id, 0, sizeof(*unique_id));
  memcpy(unique_id->internal, kUniqueIdMagic, sizeof(kUniqueIdMagic));
  memcpy(unique_id->internal + 16, name, strlen(name) + 1);
  return kLcalSuccess;
}

FAKE_CANN_EXPORT int LcalCommInitRank(UniqueId comm_id, int rank_size, int rank, void** comm) {
  if (memcmp(comm_id.internal, kUniqueIdMagic, sizeof(kUniqueIdMagic)) != 0) return kLcalErrorInternal;
  return init(std::string(comm_id.internal + 16), rank_size, rank, comm);
}

FAKE_CANN_EXPORT int LcalCommInitRankWithCustDomainSize(int comm_domain, int buffer_mb, int rank_size, int rank,
                                                        void** comm, bool) {
  if (buffer_mb < kLcalMinBufferMb || comm_domain < 0 || comm_domain > 65535) {
    set_recent_error("simulated LCAL: lcal comm buffer size should not be less than 200 MBytes");
    return kLcalErrorInternal;
  }
  return init("/npgfake-lcaldom-" + std::to_string(comm_domain), rank_size, rank, comm);
}

FAKE_CANN_EXPORT int LcalCommInitRankWithDomain(int comm_domain, int rank_size, int rank, void** comm) {
  return LcalCommInitRankWithCustDomainSize(comm_domain, kLcalMinBufferMb, rank_size, rank, comm, false);
}

FAKE_CANN_EXPORT int LcalCommInitThread(int rank, int rank_size, const char* uid, void** comm) {
  if (uid == nullptr) return kLcalErrorParaCheckFail;
  char name[96];
  snprintf(name, sizeof(name), "/npgfake-%d-lcalthr-%016zx", static_cast<int>(getpid()),
           std::hash<std::string>()(uid));
  return init(name, rank_size, rank, comm);
}

FAKE_CANN_EXPORT int LcclAllGather(void* send, void* recv, int64_t count, int dtype, void* comm, void* stream) {
  if (count < 0) return kLcalErrorParaCheckFail;
  return enqueue_all_gather(kLcal, comm, send, recv, static_cast<uint64_t>(count), dtype, stream);
}

FAKE_CANN_EXPORT int LcclCommDestroy(void* comm) { return destroy_comm(kLcal, comm); }

}  // extern "C"
