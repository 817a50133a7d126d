// What the TCP transports (the ring and log-N) share: the header every block travels with,
// the one layout verdict over all ranks' headers, and the non-blocking socket steps of their
// poll loops, bounded by the deadline and the abort signal, with errors that name the peer.
#ifndef NPUGATHER_HOST_TCP_FRAMES_H_
#define NPUGATHER_HOST_TCP_FRAMES_H_

#include <poll.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <chrono>
#include <string>
#include <vector>

#include "host_transport.h"
#include "socket_util.h"

namespace npg {
namespace host {

// Bytes one send or recv moves at most, so that a loop round stays short.
constexpr uint64_t kIoChunkBytes = 1ull << 20;
// Pieces one sendmsg gathers at most.
constexpr int kSendIovecs = 64;

// A block's header: magic (one per transport), origin rank, sequence, the origin's send size
// and layout digest, and the bytes that follow it on this link (0 when they were refused).
struct BlockHeader {
  // 40 bytes of fields, zero-padded to a cache line: a block that follows its header keeps
  // the 64-byte alignment it has in memory within the stream, so the kernel's copies into and
  // out of socket buffers have source and destination aligned alike (a 40-byte header made
  // 4-8 MiB blocks 1.5x slower on loopback; docs/performance/2026-12-open-mpi-quiet-machine.md).
  static constexpr size_t kBytes = 64;
  uint32_t magic;
  int32_t rank;
  uint64_t seq;
  uint64_t bytes;
  uint64_t digest;
  uint64_t following;

  void encode(uint8_t* out) const;
  // From untrusted bytes; the receiver checks magic, rank and seq itself.
  static BlockHeader decode(const uint8_t* in);
  // Rewrites the following field of an encoded header.
  static void set_following(uint8_t* header, uint64_t following);
};

std::string rank_name(int32_t r);

// What one link sends: pieces in order, each sendable up to its ready bytes (a forwarded
// block becomes ready as it arrives). Gathers many pieces per sendmsg, so that small blocks
// and their headers leave in one segment and the receiver wakes once, not once per piece.
class SendStream {
 public:
  void add(const uint8_t* data, uint64_t len, uint64_t ready);
  void add(const uint8_t* data, uint64_t len) { add(data, len, len); }
  // Makes the first `ready` bytes of piece `index` sendable.
  void set_ready(size_t index, uint64_t ready) { pieces_[index].ready = ready; }
  size_t size() const { return pieces_.size(); }
  uint64_t total() const { return total_; }
  uint64_t sent() const { return sent_; }
  bool done() const { return sent_ == total_; }
  // True when a byte is ready to go.
  bool can_send();
  // Sends what is ready (at most budget bytes, roughly) on fd; stops when the socket is full.
  void send_ready(int fd, int32_t peer, uint64_t budget);

 private:
  struct Piece {
    const uint8_t* data;
    uint64_t len;
    uint64_t ready;
  };
  std::vector<Piece> pieces_;
  size_t index_ = 0;     // first piece not sent in full
  uint64_t offset_ = 0;  // bytes of it sent
  uint64_t total_ = 0;
  uint64_t sent_ = 0;
};

// Where the next bytes of a stream of blocks go, got of the current part read: the rest of
// the header, else the rest of the block's following bytes at dst, or into scratch when dst
// is null (bytes refused, read and dropped); at most kIoChunkBytes.
iovec receive_span(bool in_header, uint8_t* header, uint8_t* dst, uint64_t following, uint64_t got,
                   std::vector<uint8_t>& scratch);

// The receiving end of one link. A read of fewer than kBufferBytes goes through a buffer that
// takes what the socket holds, up to kBufferBytes, so that one recv brings a small block's
// header and its bytes, often the next blocks' too (a header and its bytes in two recv calls
// made 1-8 KiB blocks cost more than Open MPI's;
// docs/performance/2026-12-large-copies-and-tcp-read-ahead.md); larger reads go straight to their
// place once the buffer is empty. Bytes read ahead wait in the buffer for
// the next read, of this collective or the next, so the reader lives as long as its link.
class LinkReader {
 public:
  static constexpr uint64_t kBufferBytes = 16ull << 10;
  // Up to want bytes into `into`: buffered bytes if any, else from one recv. The bytes read,
  // 0 when the socket has none now, -1 at the end of the stream. A lost connection is
  // REMOTE_ERROR naming peer.
  int64_t read(int fd, uint8_t* into, uint64_t want, int32_t peer);
  // Nothing buffered: one recvmsg of a unit's header into header (BlockHeader::kBytes) and on,
  // without waiting for more, straight into body (at most body_len bytes) where the receiver
  // expects the unit's bytes, which saves a system call and a copy when it is right. When it
  // is not, the caller gives the body's bytes back (unread). Returns as read.
  int64_t read_header_and_body(int fd, uint8_t* header, uint8_t* body, uint64_t body_len, int32_t peer);
  // Puts bytes read into the wrong place back in front of the buffered ones.
  void unread(const uint8_t* bytes, uint64_t len);
  // True when bytes wait in the buffer: the caller reads them before it waits on the socket,
  // which may have nothing more to say.
  bool buffered() const { return begin_ < end_; }

 private:
  std::vector<uint8_t> buffer_;
  size_t begin_ = 0;  // first unread byte
  size_t end_ = 0;
};

// headers holds every rank's header (BlockHeader::kBytes each, by rank): throws the verdict
// every rank reaches from the same headers, INVALID_USAGE when a rank rejected its arguments
// or the ranks disagree on the receive counts.
void judge_layout(const uint8_t* headers, const GatherArgs& args, int32_t size);

// How a rank waits for its links before it sleeps in poll.
struct LinkSpin {
  std::chrono::microseconds budget;  // polls without sleeping this long after the last progress
  bool yield;                        // gives up its CPU between polls (sched_yield)
};

// How a ring or log-N step waits for its links: fds[0 .. links-1] are the links, fds[links ..
// n-2] side channels (urgent bytes, the ring's reverse direction) that only a poll reports, and
// fds[n-1] the abort eventfd. At the start and after each step that moved bytes it reports every
// link ready without a system call, so that the step tries them: the send side is then almost
// always writable and the next unit often there already, and a poll would only add a call.
// After a try that moved nothing it polls without sleeping until spin.budget has passed since the
// last progress, then sleeps in poll bounded by the deadline (and by wake_by).
class LinkWaiter {
 public:
  LinkWaiter(LinkSpin spin, const Deadline& deadline, const AbortSignal& abort);
  // Sets revents of the links to try. False when nothing became ready: the caller checks the
  // deadline and names what it waited for. Throws ABORTED.
  bool wait(pollfd* fds, nfds_t n, nfds_t links);
  bool wait(pollfd* fds, nfds_t n) { return wait(fds, n, n - 1); }
  // After the step's I/O: whether it moved bytes.
  void stepped(bool moved);
  // A sleep in poll ends by then too (wait returns false); time_point::max() for none.
  void wake_by(std::chrono::steady_clock::time_point at) { wake_by_ = at; }

 private:
  LinkSpin spin_;
  const Deadline& deadline_;
  const AbortSignal& abort_;
  std::chrono::steady_clock::time_point idle_since_;
  std::chrono::steady_clock::time_point wake_by_ = std::chrono::steady_clock::time_point::max();
  bool try_first_ = true;
};

// Signals between ranks beside the blocks: why a rank gave up, so that the ranks it feeds name
// the rank that stalled or left (docs/host-protocol.md, "TCP ring"), or an answer to the ring's
// probe. One byte: the sender gave up because the rank `distance` places before it (sender -
// distance, modulo the ranks) stalled (kUrgentTimedOut) or closed its communicator (kUrgentClosed;
// distance 0: the sender itself; kUrgentFar: farther than 62 ranks, or unknown); a byte below
// kUrgentTimedOut answers a probe (TcpRing). Where a link is between units it travels in band,
// as a frame in place of a block header (magic kSignalMagic, the byte in the bytes field).
// Otherwise it is one urgent byte (TCP out-of-band data), which gets past a stream stopped in
// the middle of a unit: the receiver's normal reads skip it, but also drop it once they pass it,
// so it only serves a receiver that waits in poll (POLLPRI) in the middle of that unit.
constexpr uint32_t kSignalMagic = 0x5344504eu;  // "NPDS"
constexpr uint8_t kUrgentTimedOut = 0x80;
constexpr uint8_t kUrgentClosed = 0xc0;
constexpr uint8_t kUrgentFar = 0x3f;
// The signal naming `culprit` (-1: unknown) as seen from `sender`, of `size` ranks.
uint8_t urgent_notice(uint8_t kind, int32_t sender, int32_t culprit, int32_t size);
// The rank a signal from sender names, or -1 when it is farther than it can say.
int32_t urgent_culprit(int byte, int32_t sender, int32_t size);
// One urgent byte; false when it could not be sent (the socket is full or shut down).
bool send_urgent(int fd, uint8_t byte) noexcept;
// The pending urgent byte, or -1 when none is pending.
int recv_urgent(int fd) noexcept;
// One signal frame, in one non-blocking send; false when it did not go out whole.
bool send_signal_frame(int fd, int32_t sender, uint64_t seq, uint8_t signal) noexcept;

// One sendmsg on a non-blocking socket: the bytes sent, 0 when it would block. A lost
// connection is REMOTE_ERROR naming peer.
uint64_t send_some(int fd, const iovec* iov, int count, int32_t peer);

// One recvmsg on a non-blocking socket into iov[0 .. count-1], otherwise as recv_some.
int64_t recv_some_v(int fd, iovec* iov, int count, int32_t peer);

// One recv on a non-blocking socket: the bytes read, 0 when it would block, -1 at the end of
// the stream (the caller says what was missing). A lost connection is REMOTE_ERROR naming peer.
int64_t recv_some(int fd, void* into, uint64_t want, int32_t peer);

}  // namespace host
}  // namespace npg

#endif  // NPUGATHER_HOST_TCP_FRAMES_H_
