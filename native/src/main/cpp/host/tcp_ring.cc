#include "tcp_ring.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>

#include "../core/error.h"
#include "handshake.h"
#include "wire.h"

namespace npg {
namespace host {
namespace {

constexpr size_t kRingAuthBytes = 4;  // the connecting rank
constexpr uint64_t kIoChunkBytes = 1ull << 20;
constexpr uint32_t kHeaderMagic = 0x3244504eu;  // "NPD2"
constexpr size_t kHeaderBytes = 40;             // magic, rank, seq, send bytes, digest, following bytes
constexpr size_t kFollowingOffset = 32;         // where the following-bytes field starts

std::string rank_name(int32_t r) { return "rank " + std::to_string(r); }

void encode_header(uint8_t* out, int32_t rank, uint64_t seq, uint64_t bytes, uint64_t digest, uint64_t following) {
  ByteWriter w;
  w.u32(kHeaderMagic);
  w.i32(rank);
  w.u64(seq);
  w.u64(bytes);
  w.u64(digest);
  w.u64(following);
  memcpy(out, w.data().data(), kHeaderBytes);
}

void set_following(uint8_t* header, uint64_t following) {
  ByteWriter w;
  w.u64(following);
  memcpy(header + kFollowingOffset, w.data().data(), 8);
}

// The fields of a header the receiver checks, from untrusted bytes.
struct BlockHeader {
  uint32_t magic;
  int32_t rank;
  uint64_t seq;
  uint64_t bytes;
  uint64_t digest;
  uint64_t following;
};

BlockHeader decode_header(const uint8_t* in) {
  ByteReader r(in, kHeaderBytes);
  BlockHeader h;
  h.magic = r.u32();
  h.rank = r.i32();
  h.seq = r.u64();
  h.bytes = r.u64();
  h.digest = r.u64();
  h.following = r.u64();
  return h;
}

int socket_error(int fd) {
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  return err;
}

}  // namespace

TcpRing::TcpRing(int32_t rank, int32_t size, UniqueFd left, UniqueFd right, AbortSignal& abort)
    : rank_(rank), size_(size), left_(std::move(left)), right_(std::move(right)), abort_(abort) {}

std::unique_ptr<TcpRing> TcpRing::adopt(int32_t rank, int32_t size, UniqueFd left, UniqueFd right,
                                        AbortSignal& abort) {
  return std::unique_ptr<TcpRing>(new TcpRing(rank, size, std::move(left), std::move(right), abort));
}

void TcpRing::set_poll_spin(std::chrono::microseconds spin) { poll_spin_ = spin; }

std::unique_ptr<TcpRing> TcpRing::connect(int32_t rank, int32_t size, int listener, const Endpoint& right,
                                          const HostRootInfo& info, const Deadline& deadline, int cancel_fd,
                                          AbortSignal& abort) {
  const int32_t right_rank = (rank + 1) % size;
  const int32_t left_rank = (rank + size - 1) % size;
  ByteWriter payload;
  payload.i32(rank);
  // Both handshakes run in one loop: every rank connects right before it accepts left.
  ClientHandshake to_right(connect_with_retry(right, deadline, rank_name(right_rank) + "'s ring endpoint"), right,
                           info, HandshakePurpose::kRing, payload.data(), rank_name(right_rank));
  Admission from_left(listener, info, HandshakePurpose::kRing, kRingAuthBytes, rank_name(rank));
  UniqueFd left;
  while (!left) {
    AdmittedConnection c = from_left.next(deadline, cancel_fd, &to_right,
                                          "waiting for " + rank_name(left_rank) + " to connect to the ring" +
                                              from_left.drop_summary());
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
  // The send stream grows as units arrive: every piece is sendable up to its `ready` bytes.
  struct Piece {
    const uint8_t* data;
    uint64_t len;
    uint64_t ready;
  };
  std::vector<Piece> send;
  send.reserve(2 * static_cast<size_t>(size_) + args.segment_count);
  send.push_back({header_of(rank_), kHeaderBytes, kHeaderBytes});
  for (size_t i = 0; i < args.segment_count; ++i) {
    const auto* p = static_cast<const uint8_t*>(args.segments[i].address);
    send.push_back({p, args.segments[i].bytes, args.segments[i].bytes});
  }
  size_t si = 0;    // piece being sent
  uint64_t so = 0;  // bytes of it sent
  uint64_t sent = 0, sent_total = 0;
  for (const Piece& p : send) sent_total += p.len;

  // Receive state: unit i (1..N-1) carries block rank-i: its header, then its bytes.
  int32_t unit = 1;
  bool in_header = true;
  uint64_t got = 0;           // bytes of the current header or data read
  uint8_t* dst = nullptr;     // where the current data goes (scratch when refused)
  uint64_t following = 0;
  size_t forward_piece = 0;   // send piece that forwards the current data, 0 if none
  std::vector<uint8_t> scratch;
  uint8_t incoming[kHeaderBytes];

  // A unit's header arrived: check it, decide where its bytes go, queue its forward.
  auto take_header = [&]() {
    const int32_t block = (rank_ - unit + size_) % size_;
    BlockHeader h = decode_header(incoming);
    if (h.magic != kHeaderMagic || h.rank != block || h.seq != args.seq) {
      throw_error(NPG_REMOTE_ERROR, rank_name(left_rank) + " forwarded a malformed collective header for rank " +
                                        std::to_string(block) + " (sequence " + std::to_string(h.seq) +
                                        ", expected " + std::to_string(args.seq) + ")");
    }
    memcpy(header_of(block), incoming, kHeaderBytes);
    following = h.following;
    // Bytes land in their place only when this rank expects exactly that many; otherwise
    // they are read and dropped so that the stream stays in step, and the verdict after
    // the stream names the disagreement on every rank.
    const bool fits = following == args.counts[block];
    if (!fits) set_following(header_of(block), 0);
    dst = fits ? args.recv + args.displs[block] : nullptr;
    forward_piece = 0;
    if (unit < size_ - 1) {
      send.push_back({header_of(block), kHeaderBytes, kHeaderBytes});
      sent_total += kHeaderBytes;
      if (fits && following > 0) {
        forward_piece = send.size();
        send.push_back({dst, following, 0});
        sent_total += following;
      }
    }
    in_header = following == 0;
    got = 0;
    if (in_header) ++unit;
  };

  auto idle_since = std::chrono::steady_clock::now();
  while (sent < sent_total || unit < size_) {
    if (abort_.triggered()) throw_aborted();
    while (si < send.size() && so == send[si].len) {
      ++si;
      so = 0;
    }
    const bool can_send = si < send.size() && so < send[si].ready;
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
    int rc = poll(fds, n, 0);
    if (rc == 0) {
      if (std::chrono::steady_clock::now() - idle_since < poll_spin_) continue;
      rc = poll(fds, n, deadline.poll_timeout_ms());
    }
    idle_since = std::chrono::steady_clock::now();
    if (rc < 0) {
      if (errno == EINTR) continue;
      throw_system_error("poll", errno);
    }
    if (fds[n - 1].revents != 0 || abort_.triggered()) throw_aborted();
    if (rc == 0) {
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
                                     " ms in the ring data exchange: sent " + std::to_string(sent) + "/" +
                                     std::to_string(sent_total) + " bytes to " + rank_name(right_rank) +
                                     ", received " + std::to_string(unit - 1) + "/" + std::to_string(size_ - 1) +
                                     " blocks from " + rank_name(left_rank) + missing);
      }
      continue;
    }
    if (right_i >= 0 && fds[right_i].revents != 0) {
      uint64_t budget = 4 * kIoChunkBytes;
      while (budget > 0 && si < send.size()) {
        if (so == send[si].len) {
          ++si;
          so = 0;
          continue;
        }
        if (so >= send[si].ready) break;
        uint64_t want = std::min(send[si].ready - so, kIoChunkBytes);
        ssize_t k = ::send(right_.get(), send[si].data + so, want, MSG_NOSIGNAL);
        if (k > 0) {
          so += static_cast<uint64_t>(k);
          sent += static_cast<uint64_t>(k);
          budget -= std::min<uint64_t>(budget, static_cast<uint64_t>(k));
          continue;
        }
        int err = k < 0 ? errno : socket_error(right_.get());
        if (err == EINTR) continue;
        if (err == EAGAIN || err == EWOULDBLOCK) break;
        throw_error(NPG_REMOTE_ERROR, "connection to " + rank_name(right_rank) + " lost: " + errno_text(err));
      }
    }
    if (left_i >= 0 && fds[left_i].revents != 0) {
      uint64_t budget = 4 * kIoChunkBytes;
      while (budget > 0 && unit < size_) {
        uint8_t* into;
        uint64_t want;
        if (in_header) {
          into = incoming + got;
          want = kHeaderBytes - got;
        } else if (dst != nullptr) {
          into = dst + got;
          want = std::min(following - got, kIoChunkBytes);
        } else {
          if (scratch.empty()) scratch.resize(kIoChunkBytes);
          into = scratch.data();
          want = std::min(following - got, kIoChunkBytes);
        }
        ssize_t k = ::recv(left_.get(), into, want, 0);
        if (k == 0) {
          // Name the block still missing: the neighbour may only pass on a failure before it.
          const int32_t block = (rank_ - unit + size_) % size_;
          std::string missing;
          if (block != left_rank) {
            missing = " while this rank still waited for " + rank_name(block) + "'s block, which comes through " +
                      rank_name(left_rank);
          }
          throw_error(NPG_REMOTE_ERROR, rank_name(left_rank) + " closed the ring connection" + missing);
        }
        if (k < 0) {
          int err = errno;
          if (err == EINTR) continue;
          if (err == EAGAIN || err == EWOULDBLOCK) break;
          throw_error(NPG_REMOTE_ERROR, "connection to " + rank_name(left_rank) + " lost: " + errno_text(err));
        }
        got += static_cast<uint64_t>(k);
        budget -= std::min<uint64_t>(budget, static_cast<uint64_t>(k));
        if (in_header) {
          if (got == kHeaderBytes) take_header();
          continue;
        }
        if (forward_piece != 0) send[forward_piece].ready = got;
        if (got == following) {
          in_header = true;
          got = 0;
          ++unit;
        }
      }
    }
  }
}

void TcpRing::all_gather_v(const GatherArgs& args, const Deadline& deadline) {
  // One stream per direction: this rank's block, then blocks rank-1, ..., rank-N+2 as they
  // arrive from the left, each unit a header (sequence, sizes, layout digest) and its bytes,
  // so the layout check costs no round of its own. Received blocks land in their place.
  std::vector<uint8_t> headers(static_cast<size_t>(size_) * kHeaderBytes);
  uint8_t* own = headers.data() + static_cast<size_t>(rank_) * kHeaderBytes;
  encode_header(own, rank_, args.seq, args.send_bytes, args.digest, args.send_bytes);
  stream(args, headers, deadline);
  // Every rank now holds every rank's header and reaches the same verdict.
  std::vector<BlockHeader> all;
  for (int32_t r = 0; r < size_; ++r) all.push_back(decode_header(headers.data() + static_cast<size_t>(r) * kHeaderBytes));
  const std::string rejected =
      rejection_verdict(args, size_, [&](int32_t r) { return std::make_pair(all[r].digest, all[r].bytes); });
  if (!rejected.empty()) throw_error(NPG_INVALID_USAGE, rejected);
  for (int32_t r = 1; r < size_; ++r) {
    if (all[r].digest != all[0].digest) {
      throw_error(NPG_INVALID_USAGE, "ranks disagree on receive counts: rank " + std::to_string(r) +
                                         "'s recv_counts differ from rank 0's");
    }
  }
  for (int32_t r = 0; r < size_; ++r) {
    if (all[r].bytes != args.counts[r]) {
      throw_error(NPG_INVALID_USAGE, "ranks disagree on receive counts: rank " + std::to_string(r) + " sends " +
                                         std::to_string(all[r].bytes) + " bytes but recv_counts[" +
                                         std::to_string(r) + "] asks for " + std::to_string(args.counts[r]) +
                                         " bytes");
    }
  }
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
