// Hierarchical all-gather for ranks on several hosts with several ranks each ("tcp-hier"):
// the ranks with the same local index on every host form a TCP ring over the hosts and
// all-gather their own blocks, then the ranks of each host exchange what their rings
// brought through shared memory. Every byte crosses each host's network link once, not
// once per rank of that host.
#ifndef NPUGATHER_HOST_HIER_TRANSPORT_H_
#define NPUGATHER_HOST_HIER_TRANSPORT_H_

#include <stdint.h>

#include <memory>
#include <string>
#include <vector>

#include "../core/error.h"
#include "bootstrap.h"
#include "host_transport.h"
#include "root_info.h"
#include "shm_segment.h"
#include "shm_transport.h"
#include "tcp_log_n.h"

namespace npg {
namespace host {

// Which ranks share a host, from the host identities in the rank table. Hosts are numbered
// in the order of their lowest rank; a host's ranks are in ascending order.
struct HostLayout {
  std::vector<std::vector<int32_t>> hosts;
  std::vector<int32_t> host_of;      // by rank
  std::vector<int32_t> local_index;  // by rank: position among its host's ranks

  static HostLayout of(const std::vector<RankInfo>& ranks);
  // Several hosts, every one with the same number (at least 2) of ranks: the shape the
  // hierarchical algorithm takes; anything else runs the flat ring.
  bool suits_hierarchy() const;
};

class HierTransport final : public HostTransport {
 public:
  // This rank's part of the set-up: its host's control segment (created by the host's
  // lowest rank, attached by the others) and its ring across hosts.
  struct Setup {
    ShmSegment segment;
    std::unique_ptr<FlatTcp> ring;  // across hosts: the ring, and log-N for small outputs as on "tcp"
    bool cma_ok = false;            // process_vm_readv reaches every peer on this host
    bool interrupted = false;       // cancel_fd became readable first
  };

  // The segment name of a host: "/npugather.<leaderPid>.<id>.<domain>-host<h>.<suffix>".
  static std::string segment_name(const RankTable& table, const HostLayout& layout, int32_t host,
                                  const HostRootInfo& info, const std::string& comm_domain);
  static size_t segment_bytes(const RankTable& table, const HostLayout& layout, int32_t host);
  // Bounded by deadline; returns with interrupted set when cancel_fd (may be -1) is readable.
  static Setup set_up(const RankTable& table, int32_t rank, uint32_t flags, int listener, const HostRootInfo& info,
                      const std::string& comm_domain, const Deadline& deadline, int cancel_fd, AbortSignal& abort);

  // go is kHier (cross-memory attach works on every host) or kHierStaging.
  HierTransport(Setup setup, const RankTable& table, int32_t rank, TransportKind go, AbortSignal& abort);

  const char* name() const override { return name_.c_str(); }
  void all_gather_v(const GatherArgs& args, const Deadline& deadline) override;
  void on_abort() noexcept override;
  void on_failure() noexcept override;
  void on_leave() noexcept override;
  void close() override;

 private:
  // Error texts of the parts count ranks within the part; names them by global rank instead.
  [[noreturn]] void rethrow_named(const Error& e, const std::vector<int32_t>& ranks, const std::string& where) const;

  HostLayout layout_;
  int32_t host_;
  int32_t local_;
  std::vector<int32_t> ring_ranks_;  // global ranks of this rank's ring, by host
  std::unique_ptr<FlatTcp> ring_;
  std::unique_ptr<ShmTransport> shm_;
  uint64_t local_seq_ = 0;
  std::string name_;
};

}  // namespace host
}  // namespace npg

#endif  // NPUGATHER_HOST_HIER_TRANSPORT_H_
