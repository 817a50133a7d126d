#include "lccl_communicator.h"

#include "../core/error.h"

namespace npg {
namespace lccl {
namespace {

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
