// Ring transport over TCP for ranks on different hosts: a pipelined, bandwidth-optimal
// all-gather where every rank forwards what it received to its right neighbour.
#ifndef NPUGATHER_HOST_TCP_RING_H_
#define NPUGATHER_HOST_TCP_RING_H_

#include <stdint.h>

#include <chrono>
#include <memory>
#include <vector>

#include "host_transport.h"
#include "root_info.h"
#include "socket_util.h"
#include "tcp_frames.h"

namespace npg {
namespace host {

class TcpRing final : public HostTransport {
 public:
  // Connects to rank+1 at right and accepts rank-1 on listener; both sides prove the
  // communicator secret by challenge-response (handshake.h). Foreign or wrong-secret
  // connections are dropped without delaying the ring. Returns null when cancel_fd
  // became readable first.
  static std::unique_ptr<TcpRing> connect(int32_t rank, int32_t size, int listener, const Endpoint& right,
                                          const HostRootInfo& info, const Deadline& deadline, int cancel_fd,
                                          AbortSignal& abort);

  // A ring over connections made elsewhere (left from rank-1, right to rank+1), already
  // authenticated the same way.
  static std::unique_ptr<TcpRing> adopt(int32_t rank, int32_t size, UniqueFd left, UniqueFd right, AbortSignal& abort);

  // Before blocking in poll the ring polls without sleeping for 1 ms: a neighbour's next
  // bytes usually arrive within it, and a sleeping rank's wake-up on a busy host costs more.
  // When this host's ranks outnumber its CPUs it yields its CPU between polls, which hands
  // the CPU at once to a co-located rank it waits for (docs/performance/2026-12-open-mpi-quiet-machine.md).
  static constexpr LinkSpin kPollSpin{std::chrono::microseconds(1000), false};
  static constexpr LinkSpin kOversubscribedPollSpin{std::chrono::microseconds(1000), true};
  void set_poll_spin(LinkSpin spin);
  // kOversubscribedPollSpin when ranks_on_host outnumber the host's CPUs, else kPollSpin.
  static LinkSpin poll_spin_for(int32_t ranks_on_host);

  static constexpr uint32_t kHeaderMagic = 0x3244504eu;  // "NPD2": the ring's block headers
  // A probe, on the reverse direction of the link from the left: magic, the unit asked about,
  // the sequence. The left answers with a signal below kUrgentTimedOut (tcp_frames.h): how far
  // before it (1 and on) lies the rank it blames for the unit it lacks too, 0 when it lacks
  // nothing, kAnswerWaitsToo while it asks its own left.
  static constexpr uint32_t kProbeMagic = 0x5150504eu;  // "NPPQ"
  // Also on the reverse direction, the same size: the sender closed its communicator, or failed
  // because a rank did (the signal naming it, as in tcp_frames.h), so the left neighbour, which
  // sends to it, fails at once when it still has to.
  static constexpr uint32_t kClosedMagic = 0x4350504eu;  // "NPPC"
  static constexpr size_t kProbeBytes = 16;
  static constexpr uint8_t kAnswerWaitsToo = 0x7e;  // not yet known: it asks its own left
  static constexpr uint8_t kAnswerUnknown = 0x7f;

  const char* name() const override { return "tcp"; }
  void all_gather_v(const GatherArgs& args, const Deadline& deadline) override;
  void on_abort() noexcept override;
  void on_failure() noexcept override;
  // Tells the right neighbour with an urgent byte (kUrgentClosed); the left sees EOF.
  void on_leave() noexcept override;
  int32_t rank() const { return rank_; }
  int right_fd() const { return right_.get(); }
  // Whether the last collective failed because a rank closed its communicator, and which
  // (-1: farther than an urgent byte says).
  bool failed_on_close() const { return failed_on_close_; }
  int32_t closed_culprit() const { return closed_culprit_; }
  void close() override;

 private:
  TcpRing(int32_t rank, int32_t size, UniqueFd left, UniqueFd right, AbortSignal& abort);
  // Sends this rank's unit (its header in headers, then its segments) to the right and
  // receives the N-1 units from the left, forwarding all but the last as their bytes
  // arrive. Fills every rank's header in headers (kHeaderBytes each, by rank).
  void stream(const GatherArgs& args, std::vector<uint8_t>& headers, const Deadline& deadline);

  int32_t rank_;
  int32_t size_;
  UniqueFd left_;
  UniqueFd right_;
  AbortSignal& abort_;
  LinkSpin poll_spin_ = kPollSpin;
  LinkReader from_left_;
  // The reverse direction of the link to the right carries the right neighbour's probes.
  bool reverse_open_ = true;
  uint8_t probe_[kProbeBytes] = {};
  size_t probe_bytes_ = 0;
  bool right_closed_ = false;  // the right neighbour said it closed (kClosedMagic)
  int32_t right_closed_culprit_ = -1;
  bool answer_owed_ = false;     // the right neighbour probed and awaits an answer
  bool waits_too_said_ = false;  // and has been told that this rank waits too
  bool failed_on_close_ = false;
  int32_t closed_culprit_ = -1;
};

}  // namespace host
}  // namespace npg

#endif  // NPUGATHER_HOST_TCP_RING_H_
