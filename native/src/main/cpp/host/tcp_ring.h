// Ring transport over TCP for ranks on different hosts: a pipelined, bandwidth-optimal
// all-gather where every rank forwards what it received to its right neighbour.
#ifndef NPUGATHER_HOST_TCP_RING_H_
#define NPUGATHER_HOST_TCP_RING_H_

#include <stdint.h>

#include <memory>
#include <vector>

#include "host_transport.h"
#include "root_info.h"
#include "socket_util.h"

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

  const char* name() const override { return "tcp"; }
  void all_gather_v(const GatherArgs& args, const Deadline& deadline) override;
  void on_abort() noexcept override;
  void on_failure() noexcept override;
  void close() override;

 private:
  struct Segment {
    uint8_t* data;
    uint64_t len;
  };
  TcpRing(int32_t rank, int32_t size, UniqueFd left, UniqueFd right, AbortSignal& abort);
  // Streams send to the right while receiving recv from the left. send[0, own_segments)
  // is this rank's own data; send[own_segments..] must be the first recv segments in
  // order: their bytes are forwarded as soon as they have arrived.
  void pump(const std::vector<Segment>& send, size_t own_segments, const std::vector<Segment>& recv,
            const Deadline& deadline, const char* phase);
  void exchange_headers(const GatherArgs& args, const Deadline& deadline);

  int32_t rank_;
  int32_t size_;
  UniqueFd left_;
  UniqueFd right_;
  AbortSignal& abort_;
};

}  // namespace host
}  // namespace npg

#endif  // NPUGATHER_HOST_TCP_RING_H_
