// Rendezvous of all ranks through the root's TCP endpoint: hello, rank table, setup
// reports and the final go. A rank joins by proving the communicator secret in a
// challenge-response handshake (handshake.h); the secret itself is never sent.
#ifndef NPUGATHER_HOST_BOOTSTRAP_H_
#define NPUGATHER_HOST_BOOTSTRAP_H_

#include <stdint.h>

#include <string>
#include <vector>

#include "npugather.h"
#include "root_info.h"
#include "socket_util.h"

namespace npg {
namespace host {

// What a rank tells the root about itself.
struct RankInfo {
  int32_t rank = 0;
  int32_t rank_size = 0;
  int32_t rank_root = 0;
  uint32_t flags = 0;
  uint64_t domain_hash = 0;
  int32_t pid = 0;
  std::string identity;
  uint64_t canary_addr = 0;
  uint64_t canary_value = 0;
  Endpoint ring;
};

enum class TransportKind : uint8_t {
  kThreads = 1,
  kProcesses = 2,  // same host, separate processes: cma or staging, decided after the probe
  kStaging = 3,
  kCma = 4,
  kTcp = 5,
  kHier = 6,         // several hosts: rings across hosts plus shared memory (cma) on each
  kHierStaging = 7,  // the same with staging on each host (cross-memory attach refused or forced)
};

struct RankTable {
  TransportKind transport = TransportKind::kTcp;
  std::string shm_name;
  uint64_t staging_chunk = 0;
  std::vector<RankInfo> ranks;  // indexed by rank
};

// A rank's result of attaching to the chosen transport.
struct SetupReport {
  bool ok = true;
  bool cma_ok = false;
  uint32_t code = NPG_SUCCESS;
  std::string text;
};

class Bootstrap {
 public:
  // Root: accepts the other ranks on listener until all joined, many handshakes at once.
  // Strangers and wrong secrets are dropped without delaying the ranks; inconsistent
  // parameters fail init on every rank.
  static Bootstrap accept_ranks(UniqueFd listener, const HostRootInfo& info, const RankInfo& self,
                                const Deadline& deadline);
  // Other ranks: connect to the root (retrying until the deadline); hello is sent separately
  // because it carries the ring endpoint bound next to this connection.
  static Bootstrap connect_root(const HostRootInfo& info, int32_t root_rank, const Deadline& deadline);

  int root_fd() const { return root_.get(); }
  const std::vector<RankInfo>& ranks() const { return ranks_; }

  void send_hello(const RankInfo& self, const Deadline& deadline);
  RankTable recv_table(int32_t rank_size, const Deadline& deadline);
  void send_report(const SetupReport& report, const Deadline& deadline) noexcept;
  TransportKind recv_go(const Deadline& deadline);

  void send_table(const RankTable& table, const Deadline& deadline);
  // Root: every other rank's report, indexed by rank; throws (after telling everyone) on failure.
  std::vector<SetupReport> collect_reports(const Deadline& deadline);
  void send_go(TransportKind kind, const Deadline& deadline);
  // Root: best-effort error frame to every connected rank.
  void fail_all(npg_result_t code, const std::string& text) noexcept;

 private:
  Bootstrap() = default;
  HostRootInfo info_;
  int32_t root_rank_ = 0;
  UniqueFd root_;                  // other ranks: the connection to the root
  std::vector<UniqueFd> members_;  // root: connection of each rank (empty for itself)
  std::vector<RankInfo> ranks_;    // root: every rank's hello
};

uint64_t domain_hash(const std::string& comm_domain);

// The hello a rank proves the secret with, and the table the root answers; the decoders
// read untrusted bytes (NPG_REMOTE_ERROR / NPG_INVALID_USAGE on anything malformed).
std::vector<uint8_t> encode_hello(const RankInfo& self);
RankInfo decode_hello(const std::vector<uint8_t>& body);
RankTable decode_table(const std::vector<uint8_t>& body, int32_t rank_size, const std::string& root);

}  // namespace host
}  // namespace npg

#endif  // NPUGATHER_HOST_BOOTSTRAP_H_
