#include "tcp_ring.h"

#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/sysinfo.h>

#include <algorithm>

#include "../core/error.h"
#include "handshake.h"
#include "tcp_frames.h"
#include "wire.h"

namespace npg {
namespace host {
namespace {

constexpr size_t kRingAuthBytes = 4;  // the connecting rank
constexpr size_t kHeaderBytes = BlockHeader::kBytes;

}  // namespace

TcpRing::TcpRing(int32_t rank, int32_t size, UniqueFd left, UniqueFd right, AbortSignal& abort)
    : rank_(rank), size_(size), left_(std::move(left)), right_(std::move(right)), abort_(abort) {}

std::unique_ptr<TcpRing> TcpRing::adopt(int32_t rank, int32_t size, UniqueFd left, UniqueFd right, AbortSignal& abort) {
  return std::unique_ptr<TcpRing>(new TcpRing(rank, size, std::move(left), std::move(right), abort));
}

void TcpRing::set_poll_spin(LinkSpin spin) { poll_spin_ = spin; }

LinkSpin TcpRing::poll_spin_for(int32_t ranks_on_host) {
  return ranks_on_host > get_nprocs() ? kOversubscribedPollSpin : kPollSpin;
}

std::unique_ptr<TcpRing> TcpRing::connect(int32_t rank, int32_t size, int listener, const Endpoint& right,
                                          const HostRootInfo& info, const Deadline& deadline, int cancel_fd,
                                          AbortSignal& abort) {
  const int32_t right_rank = (rank + 1) % size;
  const int32_t left_rank = (rank + size - 1) % size;
  ByteWriter payload;
  payload.i32(rank);
  // Both handshakes run in one loop: every rank connects right before it accepts left.
  ClientHandshake to_right(connect_with_retry(right, deadline, rank_name(right_rank) + "'s ring endpoint"), right, info,
                           HandshakePurpose::kRing, payload.data(), rank_name(right_rank));
  Admission from_left(listener, info, HandshakePurpose::kRing, kRingAuthBytes, rank_name(rank));
  UniqueFd left;
  while (!left) {
    AdmittedConnection c =
        from_left.next(deadline, cancel_fd, &to_right,
                       "waiting for " + rank_name(left_rank) + " to connect to the ring" + from_left.drop_summary());
    if (!c.fd) return nullptr;
    try {
      ByteReader r(c.payload);
      int32_t sender = r.i32();
      r.expect_end();
      if (sender == left_rank) {
        left = std::move(c.fd);
        continue;
      }
      from_left.reject(c, "sender claims rank " + std::to_string(sender) + ", expected " + std::to_string(left_rank));
    } catch (const Error& e) {
      from_left.reject(c, e.what());
    }
  }
  if (!to_right.finish(deadline, cancel_fd)) return nullptr;
  return std::unique_ptr<TcpRing>(new TcpRing(rank, size, std::move(left), to_right.take_fd(), abort));
}

void TcpRing::stream(const GatherArgs& args, std::vector<uint8_t>& headers, const Deadline& deadline) {
  const int32_t left_rank = (rank_ + size_ - 1) % size_;
  const int32_t right_rank = (rank_ + 1) % size_;
  auto header_of = [&](int32_t r) { return headers.data() + static_cast<size_t>(r) * kHeaderBytes; };
  // The send stream grows as units arrive; a forwarded block is sendable as it arrives.
  SendStream send;
  send.add(header_of(rank_), kHeaderBytes);
  for (size_t i = 0; i < args.segment_count; ++i) {
    send.add(static_cast<const uint8_t*>(args.segments[i].address), args.segments[i].bytes);
  }

  // Receive state: unit i (1..N-1) carries block rank-i: its header, then its bytes.
  int32_t unit = 1;
  bool in_header = true;
  uint64_t got = 0;        // bytes of the current header or data read
  uint8_t* dst = nullptr;  // where the current data goes (scratch when refused)
  uint64_t following = 0;
  size_t forward_piece = 0;  // send piece that forwards the current data, 0 if none
  std::vector<uint8_t> scratch;
  uint8_t incoming[kHeaderBytes];

  // A unit's header arrived: check it, decide where its bytes go, queue its forward.
  auto take_header = [&]() {
    const int32_t block = (rank_ - unit + size_) % size_;
    BlockHeader h = BlockHeader::decode(incoming);
    if (h.magic != kHeaderMagic || h.rank != block || h.seq != args.seq) {
      throw_error(NPG_REMOTE_ERROR, rank_name(left_rank) + " forwarded a malformed collective header for rank " +
                                        std::to_string(block) + " (sequence " + std::to_string(h.seq) + ", expected " +
                                        std::to_string(args.seq) + ")");
    }
    memcpy(header_of(block), incoming, kHeaderBytes);
    following = h.following;
    // Bytes land in their place only when this rank expects exactly that many; otherwise
    // they are read and dropped so that the stream stays in step, and the verdict after
    // the stream names the disagreement on every rank.
    const bool fits = following == args.counts[block];
    if (!fits) BlockHeader::set_following(header_of(block), 0);
    dst = fits ? args.recv + args.displs[block] : nullptr;
    forward_piece = 0;
    if (unit < size_ - 1) {
      send.add(header_of(block), kHeaderBytes);
      if (fits && following > 0) {
        forward_piece = send.size();
        send.add(dst, following, 0);
      }
    }
    in_header = following == 0;
    got = 0;
    if (in_header) ++unit;
  };

  LinkWaiter waiter(poll_spin_, deadline, abort_);
  while (!send.done() || unit < size_) {
    const bool can_send = send.can_send();
    pollfd fds[3];
    nfds_t n = 0;
    int right_i = -1, left_i = -1;
    if (can_send) {
      right_i = static_cast<int>(n);
      fds[n++] = {right_.get(), POLLOUT, 0};
    }
    if (unit < size_) {
      left_i = static_cast<int>(n);
      fds[n++] = {left_.get(), POLLIN, 0};
    }
    fds[n++] = {abort_.fd(), POLLIN, 0};
    if (left_i >= 0 && from_left_.buffered()) {
      fds[left_i].revents = POLLIN;  // bytes already read go first: the socket may hold no more
    } else if (!waiter.wait(fds, n)) {
      if (deadline.expired()) {
        // Name the rank whose block is missing: a stalled rank stops the ring at every rank
        // after it, and blaming the left neighbour would point at a rank that merely waits too.
        std::string missing;
        if (unit < size_) {
          const int32_t block = (rank_ - unit + size_) % size_;
          missing = "; still waiting for " + rank_name(block) + "'s block" +
                    (block == left_rank ? std::string() : " (it comes through " + rank_name(left_rank) + ")");
        }
        throw_error(NPG_TIMEOUT, "timed out after " + std::to_string(deadline.budget_ms()) +
                                     " ms in the ring data exchange: sent " + std::to_string(send.sent()) + "/" +
                                     std::to_string(send.total()) + " bytes to " + rank_name(right_rank) +
                                     ", received " + std::to_string(unit - 1) + "/" + std::to_string(size_ - 1) +
                                     " blocks from " + rank_name(left_rank) + missing);
      }
      continue;
    }
    const uint64_t sent_before = send.sent();
    bool read_some = false;
    if (right_i >= 0 && fds[right_i].revents != 0) send.send_ready(right_.get(), right_rank, 4 * kIoChunkBytes);
    if (left_i >= 0 && fds[left_i].revents != 0) {
      uint64_t budget = 4 * kIoChunkBytes;
      while (budget > 0 && unit < size_) {
        // A unit whose header and bytes fit the reader's buffer comes in one read through it;
        // a larger one's bytes go straight to where this rank expects them, with the header in
        // one call (saving the buffer's copy), and back to the reader if the header disagrees.
        const int32_t block = (rank_ - unit + size_) % size_;
        uint8_t* guess = nullptr;
        int64_t k = 0;
        if (in_header && got == 0 && !from_left_.buffered() &&
            args.counts[block] + kHeaderBytes > LinkReader::kBufferBytes) {
          guess = args.recv + args.displs[block];
          k = from_left_.read_header_and_body(left_.get(), incoming, guess, std::min(args.counts[block], kIoChunkBytes),
                                              left_rank);
        } else {
          const iovec span = receive_span(in_header, incoming, dst, following, got, scratch);
          k = from_left_.read(left_.get(), static_cast<uint8_t*>(span.iov_base), span.iov_len, left_rank);
        }
        if (k < 0) {
          // Name the block still missing: the neighbour may only pass on a failure before it.
          std::string missing;
          if (block != left_rank) {
            missing = " while this rank still waited for " + rank_name(block) + "'s block, which comes through " +
                      rank_name(left_rank);
          }
          throw_error(NPG_REMOTE_ERROR, rank_name(left_rank) + " closed the ring connection" + missing);
        }
        if (k == 0) break;
        read_some = true;
        budget -= std::min<uint64_t>(budget, static_cast<uint64_t>(k));
        if (guess != nullptr && static_cast<uint64_t>(k) > kHeaderBytes) {
          take_header();
          const uint64_t body = static_cast<uint64_t>(k) - kHeaderBytes;
          if (dst != guess) {
            from_left_.unread(guess, body);  // not this unit's bytes, or not expected here
            continue;
          }
          got = body;
        } else {
          got += static_cast<uint64_t>(k);
          if (in_header) {
            if (got == kHeaderBytes) take_header();
            continue;
          }
        }
        if (forward_piece != 0) send.set_ready(forward_piece, got);
        if (got == following) {
          in_header = true;
          got = 0;
          ++unit;
        }
      }
    }
    waiter.stepped(read_some || send.sent() != sent_before);
  }
}

void TcpRing::all_gather_v(const GatherArgs& args, const Deadline& deadline) {
  // One stream per direction: this rank's block, then blocks rank-1, ..., rank-N+2 as they
  // arrive from the left, each unit a header (sequence, sizes, layout digest) and its bytes,
  // so the layout check costs no round of its own. Received blocks land in their place.
  std::vector<uint8_t> headers(static_cast<size_t>(size_) * kHeaderBytes);
  BlockHeader{kHeaderMagic, rank_, args.seq, args.send_bytes, args.digest, args.send_bytes}.encode(
      headers.data() + static_cast<size_t>(rank_) * kHeaderBytes);
  stream(args, headers, deadline);
  // Every rank now holds every rank's header and reaches the same verdict.
  judge_layout(headers.data(), args, size_);
  args.write_own_block();
}

void TcpRing::on_abort() noexcept {
  // Peers see EOF at once instead of waiting for their timeout; fds stay valid until close.
  if (left_) shutdown(left_.get(), SHUT_RDWR);
  if (right_) shutdown(right_.get(), SHUT_RDWR);
}

void TcpRing::on_failure() noexcept { on_abort(); }

void TcpRing::close() {
  int err = left_.reset();
  int err2 = right_.reset();
  if (err == 0) err = err2;
  if (err != 0) throw_system_error("closing ring sockets", err);
}

}  // namespace host
}  // namespace npg
