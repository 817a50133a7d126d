// The flat TCP transport with a log-N algorithm for small messages: Bruck's all-gather
// takes ceil(log2 N) steps where the ring takes N-1, so it wins while latency dominates.
// At step k rank r sends every block it holds (r, r+1, ..., r+2^k-1) to rank r-2^k and
// receives r+2^k's from it; every block travels as a header (origin, sequence, the origin's
// send size and layout digest, the bytes that follow) and its bytes, straight to its place.
#ifndef NPUGATHER_HOST_TCP_LOG_N_H_
#define NPUGATHER_HOST_TCP_LOG_N_H_

#include <stdint.h>

#include <chrono>
#include <memory>
#include <vector>

#include "host_transport.h"
#include "root_info.h"
#include "socket_util.h"
#include "tcp_frames.h"
#include "tcp_ring.h"

namespace npg {
namespace host {

// Bruck's all-gather over one connection per step and direction.
class TcpBruck {
 public:
  TcpBruck(int32_t rank, int32_t size, std::vector<UniqueFd> to, std::vector<UniqueFd> from, AbortSignal& abort);

  static int32_t steps(int32_t size);                                  // ceil(log2 size)
  static int32_t send_peer(int32_t rank, int32_t size, int32_t step);  // rank - 2^step
  static int32_t recv_peer(int32_t rank, int32_t size, int32_t step);  // rank + 2^step

  // Moves every block when with_data, else only the headers; fills headers (kHeaderBytes per
  // rank, by rank). A block whose size the receiver disputes is read and dropped, and its
  // header forwarded with no bytes, so the steps stay in step; the caller judges the layout.
  void exchange(const GatherArgs& args, bool with_data, std::vector<uint8_t>& headers, const Deadline& deadline);
  void set_poll_spin(LinkSpin spin) { poll_spin_ = spin; }
  void shutdown_links() noexcept;
  // A signal frame on every link this rank sends on (tcp_frames.h), which must be between blocks.
  void send_signal_all(uint8_t signal) noexcept;
  // Whether the last exchange failed because a rank closed its communicator, and which (-1:
  // farther than an urgent byte says).
  bool failed_on_close() const { return failed_on_close_; }
  int32_t closed_culprit() const { return closed_culprit_; }
  int close() noexcept;  // first errno or 0

  static constexpr size_t kHeaderBytes = BlockHeader::kBytes;
  static constexpr uint32_t kHeaderMagic = 0x3142504eu;  // "NPB1": log-N's block headers

 private:
  void run_step(const GatherArgs& args, int32_t step, std::vector<uint8_t>& headers, const Deadline& deadline);

  int32_t rank_;
  int32_t size_;
  std::vector<UniqueFd> to_;         // by step: to rank - 2^step
  std::vector<UniqueFd> from_;       // by step: from rank + 2^step
  std::vector<LinkReader> readers_;  // by step: the reading end of from_[step]
  AbortSignal& abort_;
  LinkSpin poll_spin_ = TcpRing::kPollSpin;
  std::vector<uint8_t> scratch_;
  bool failed_on_close_ = false;
  int32_t closed_culprit_ = -1;
};

// Which all-gather the flat TCP transport runs.
enum class TcpAlgorithm {
  kAuto,  // log-N for small messages from kMinLogNRanks ranks on, the ring otherwise
  kRing,  // NPG_FLAG_FORCE_RING
  kLogN,  // NPG_FLAG_FORCE_LOG_N
};

// The flat TCP transport ("tcp", or "tcp-log-n" when log-N is forced): the ring, plus the
// log-N links when the algorithm may use them.
class FlatTcp final : public HostTransport {
 public:
  // Below this many ranks log2 N saves no step over N-1.
  static constexpr int32_t kMinLogNRanks = 4;
  // kAuto runs log-N while the whole output is at most this many bytes (measured crossover
  // on loopback at 8 ranks, docs/performance/2026-12-log-n-bruck.md).
  static constexpr uint64_t kLogNMaxBytes = 256ull << 10;

  static TcpAlgorithm algorithm(uint32_t flags);
  // Connects the ring (and the log-N links when wanted) with challenge-response handshakes;
  // endpoints[i] is the listening endpoint of member i (0..size-1). Null when cancel_fd (may
  // be -1) became readable first.
  static std::unique_ptr<FlatTcp> connect(int32_t rank, int32_t size, uint32_t flags, int listener,
                                          const std::vector<Endpoint>& endpoints, const HostRootInfo& info,
                                          const Deadline& deadline, int cancel_fd, AbortSignal& abort);

  const char* name() const override { return algorithm_ == TcpAlgorithm::kLogN ? "tcp-log-n" : "tcp"; }
  void set_poll_spin(LinkSpin spin);
  void all_gather_v(const GatherArgs& args, const Deadline& deadline) override;
  void on_abort() noexcept override;
  void on_failure() noexcept override;
  void on_leave() noexcept override;
  void close() override;

 private:
  FlatTcp(TcpAlgorithm algorithm, int32_t size, std::unique_ptr<TcpRing> ring, std::unique_ptr<TcpBruck> bruck);
  // The log-N steps, then the ring for a large output.
  void run_with_links(const GatherArgs& args, const Deadline& deadline);

  TcpAlgorithm algorithm_;
  int32_t size_;
  std::unique_ptr<TcpRing> ring_;
  std::unique_ptr<TcpBruck> bruck_;  // null when the algorithm never takes log-N here
};

}  // namespace host
}  // namespace npg

#endif  // NPUGATHER_HOST_TCP_LOG_N_H_
