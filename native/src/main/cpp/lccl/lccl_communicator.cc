#include "lccl_communicator.h"

#include <map>
#include <mutex>
#include <set>

#include "../core/error.h"

namespace npg {
namespace lccl {
namespace {

// ATB's LcalCommInitThread records the devices of a uid in a process-wide table it never clears
// (LcalComm::GetDevThread fills g_devList[uid] once; ~LcalComm erases only the peer memory): a
// later communicator with the same uid would read the earlier one's devices instead of waiting
// for its own ranks'. So a uid serves one communicator per process: its rank_size ranks, each
// once. Claimed before LCAL is called, since ATB records the device before its rendezvous can fail.
struct ThreadUid {
  int32_t rank_size = 0;
  std::set<int32_t> ranks;
};

void claim_thread_uid(const LcclInit& init, const cann::DeviceCommunicator& device) {
  static std::mutex* mutex = new std::mutex();
  static std::map<std::string, ThreadUid>* claimed = new std::map<std::string, ThreadUid>();
  std::lock_guard<std::mutex> lock(*mutex);
  ThreadUid& uid = (*claimed)[init.uid];
  const bool reused = uid.rank_size != 0 && (uid.rank_size != device.size() || uid.ranks.count(device.rank()) > 0 ||
                                             static_cast<int32_t>(uid.ranks.size()) == uid.rank_size);
  if (reused) {
    throw_error(NPG_INVALID_USAGE,
                init.uid_origin + " was already used by a communicator of " + std::to_string(uid.rank_size) +
                    " ranks in this process " + device.where() +
                    "; LCCL's thread mode (LcalCommInitThread) remembers a uid's devices for the life of the process, "
                    "so a new communicator with it would pair ranks with the earlier one's devices: give every "
                    "communicator its own comm_domain, or pass \"\" with a fresh root info");
  }
  uid.rank_size = device.size();
  uid.ranks.insert(device.rank());
}

class LcclCollectives final : public cann::DeviceCollectives {
 public:
  LcclCollectives(const LcalApi& api, LcalCommPtr comm) : api_(api), comm_(comm) {}
  const char* all_gather_name() const override { return "LcclAllGather"; }
  void all_gather(const char* op, void* send, void* recv, uint64_t bytes, aclrtStream stream,
                  const std::string& where) override {
    if (bytes > static_cast<uint64_t>(INT64_MAX)) {
      throw_error(NPG_INVALID_ARGUMENT, "LcclAllGather of " + std::to_string(bytes) + " bytes per rank " + where +
                                            " exceeds its int64 count");
    }
    int rc = api_.LcclAllGather(send, recv, static_cast<int64_t>(bytes), kLcalByteDataType, comm_, stream);
    if (rc != kLcalSuccess) throw_lcal_error(api_, op, rc, where);
  }
  void destroy(const std::string& where) override {
    int rc = api_.LcclCommDestroy(comm_);
    if (rc != kLcalSuccess) throw_lcal_error(api_, "LcclCommDestroy", rc, where);
  }

 private:
  const LcalApi& api_;
  LcalCommPtr comm_;
};

std::unique_ptr<cann::DeviceCollectives> connect(const LcalApi& api, const cann::DeviceCommunicator& device,
                                                 const LcclInit& init) {
  const int n = device.size();
  const int rank = device.rank();
  LcalCommPtr comm = nullptr;
  int rc = kLcalSuccess;
  const char* op = "";
  switch (init.kind) {
    case LcclInit::Kind::kDomain:
      if (api.LcalCommInitRankWithCustDomainSize != nullptr) {
        op = "LcalCommInitRankWithCustDomainSize";
        rc = api.LcalCommInitRankWithCustDomainSize(init.domain, init.buffer_mb, n, rank, &comm, false);
      } else if (init.buffer_mb == kLcalMinBufferMb) {
        op = "LcalCommInitRankWithDomain";
        rc = api.LcalCommInitRankWithDomain(init.domain, n, rank, &comm);
      } else {
        throw_error(NPG_INVALID_USAGE, "comm_domain \"" + std::to_string(init.domain) + ":" +
                                           std::to_string(init.buffer_mb) +
                                           "\" needs LcalCommInitRankWithCustDomainSize, "
                                           "which " +
                                           api.path + " lacks (older ATB): use a buffer of " +
                                           std::to_string(kLcalMinBufferMb) + " MB or a newer ATB");
      }
      break;
    case LcclInit::Kind::kThread:
      claim_thread_uid(init, device);
      op = "LcalCommInitThread";
      rc = api.LcalCommInitThread(rank, n, init.uid.c_str(), &comm);
      break;
  }
  if (rc != kLcalSuccess) {
    // LCAL may hand out a half-made communicator before failing its init.
    if (comm != nullptr) api.LcclCommDestroy(comm);
    throw_lcal_error(api, op, rc, device.where());
  }
  return std::unique_ptr<cann::DeviceCollectives>(new LcclCollectives(api, comm));
}

}  // namespace

std::unique_ptr<cann::DeviceCommunicator> create_lccl_communicator(const CommConfig& config, const LcclInit& init) {
  const LcalApi& api = lcal_api();
  return cann::DeviceCommunicator::create(
      *api.acl, "lccl", config, [&](const cann::DeviceCommunicator& device) { return connect(api, device, init); });
}

}  // namespace lccl
}  // namespace npg
