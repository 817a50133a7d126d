// The host backend's communicator: rendezvous through the root, then one transport.
#ifndef NPUGATHER_HOST_HOST_COMMUNICATOR_H_
#define NPUGATHER_HOST_HOST_COMMUNICATOR_H_

#include <stdint.h>

#include <memory>
#include <string>
#include <vector>

#include "../core/backend.h"
#include "../core/communicator.h"
#include "bootstrap.h"
#include "hier_transport.h"
#include "host_transport.h"
#include "root_info.h"
#include "shm_segment.h"
#include "tcp_log_n.h"
#include "tcp_ring.h"

namespace npg {
namespace host {

class HostCommunicator final : public Communicator {
 public:
  // Blocks until every rank joined and attached to the transport, or the timeout.
  static std::unique_ptr<HostCommunicator> create(const CommConfig& config);

  int32_t rank() const override { return rank_; }
  int32_t size() const override { return size_; }
  const char* transport() const override { return transport_ ? transport_->name() : "none"; }
  void all_gather_v(const npg_segment_t* segments, size_t segment_count, bool write_own, void* recv,
                    const uint64_t* counts_bytes, const uint64_t* displs_bytes) override;
  void reject(const std::string& reason) override;
  void abort() noexcept override;
  void close() override;

  // Longest error text a rejecting rank passes to its peers.
  static constexpr size_t kMaxRejectionBytes = 1024;

 private:
  HostCommunicator(int32_t rank, int32_t size, int64_t timeout_ms);
  void join(const CommConfig& config, const HostRootInfo& info);
  void join_as_root(const CommConfig& config, const HostRootInfo& info, UniqueFd listener, RankInfo self,
                    const Deadline& deadline);
  void join_as_member(const CommConfig& config, const HostRootInfo& info, RankInfo self, const Deadline& deadline,
                      const Deadline& member_deadline);
  [[noreturn]] void join_standing_in(const HostRootInfo& info, UniqueFd listener, const RankInfo& self,
                                     const Deadline& deadline);
  [[noreturn]] void join_claiming_root(const HostRootInfo& info, const RankInfo& self, const std::string& claim,
                                       const Deadline& deadline);
  // One collective; digest is kRejectedDigest for a rank that only reports a rejection.
  void run(const npg_segment_t* segments, size_t segment_count, bool write_own, void* recv,
           const uint64_t* counts_bytes, const uint64_t* displs_bytes, bool rejecting);
  // After a collective in which some ranks rejected their arguments: gathers their texts in
  // one more collective and throws the verdict every rank shares.
  [[noreturn]] void fail_with_rejections(const std::vector<uint64_t>& lengths);
  void install(TransportKind kind, const RankTable& table, ShmSegment segment, std::unique_ptr<FlatTcp> ring,
               HierTransport::Setup hier);

  int32_t rank_;
  int32_t size_;
  int64_t timeout_ms_;
  AbortSignal abort_;
  std::unique_ptr<HostTransport> transport_;
  uint64_t seq_ = 0;
  std::string rejection_;  // this rank's error text while it reports a rejection
  std::string broken_;     // first non-recoverable failure; later calls refuse to run
  uint64_t canary_ = 0;    // read by peers' cross-memory-attach probe during init
};

}  // namespace host
}  // namespace npg

#endif  // NPUGATHER_HOST_HOST_COMMUNICATOR_H_
