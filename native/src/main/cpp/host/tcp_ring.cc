#include "tcp_ring.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <algorithm>

#include "../core/error.h"
#include "handshake.h"
#include "wire.h"

namespace npg {
namespace host {
namespace {

constexpr size_t kRingAuthBytes = 4;  // the connecting rank
constexpr uint64_t kIoChunkBytes = 1ull << 20;
constexpr uint32_t kHeaderMagic = 0x4448504eu;  // "NPHD"
constexpr size_t kHeaderBytes = 32;             // magic, rank, seq, bytes, digest

std::string rank_name(int32_t r) { return "rank " + std::to_string(r); }

void encode_header(uint8_t* out, int32_t rank, uint64_t seq, uint64_t bytes, uint64_t digest) {
  ByteWriter w;
  w.u32(kHeaderMagic);
  w.i32(rank);
  w.u64(seq);
  w.u64(bytes);
  w.u64(digest);
  memcpy(out, w.data().data(), kHeaderBytes);
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

void TcpRing::pump(const std::vector<Segment>& send, size_t own_segments, const std::vector<Segment>& recv,
                   const Deadline& deadline, const char* phase) {
  const int32_t left_rank = (rank_ + size_ - 1) % size_;
  const int32_t right_rank = (rank_ + 1) % size_;
  uint64_t send_total = 0;
  uint64_t recv_total = 0;
  for (const auto& s : send) send_total += s.len;
  for (const auto& s : recv) recv_total += s.len;
  uint64_t own = 0;
  for (size_t i = 0; i < own_segments && i < send.size(); ++i) own += send[i].len;
  uint64_t sent = 0;
  uint64_t received = 0;
  size_t si = 0, ri = 0;      // current segment
  uint64_t so = 0, ro = 0;    // offset inside it
  while (sent < send_total || received < recv_total) {
    if (abort_.triggered()) throw_aborted();
    const uint64_t available = std::min(send_total, own + received);
    pollfd fds[3];
    nfds_t n = 0;
    int right_i = -1, left_i = -1;
    if (sent < available) {
      right_i = static_cast<int>(n);
      fds[n++] = {right_.get(), POLLOUT, 0};
    }
    if (received < recv_total) {
      left_i = static_cast<int>(n);
      fds[n++] = {left_.get(), POLLIN, 0};
    }
    fds[n++] = {abort_.fd(), POLLIN, 0};
    int rc = poll(fds, n, deadline.poll_timeout_ms());
    if (rc < 0) {
      if (errno == EINTR) continue;
      throw_system_error("poll", errno);
    }
    if (fds[n - 1].revents != 0 || abort_.triggered()) throw_aborted();
    if (rc == 0) {
      if (deadline.expired()) {
        throw_error(NPG_TIMEOUT, "timed out after " + std::to_string(deadline.budget_ms()) + " ms in the ring " +
                                     phase + ": sent " + std::to_string(sent) + "/" + std::to_string(send_total) +
                                     " bytes to " + rank_name(right_rank) + ", received " +
                                     std::to_string(received) + "/" + std::to_string(recv_total) + " bytes from " +
                                     rank_name(left_rank));
      }
      continue;
    }
    if (right_i >= 0 && fds[right_i].revents != 0) {
      uint64_t budget = 4 * kIoChunkBytes;
      while (sent < available && budget > 0) {
        while (so == send[si].len) {
          ++si;
          so = 0;
        }
        uint64_t want = std::min({send[si].len - so, available - sent, kIoChunkBytes});
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
      while (received < recv_total && budget > 0) {
        while (ro == recv[ri].len) {
          ++ri;
          ro = 0;
        }
        uint64_t want = std::min(recv[ri].len - ro, kIoChunkBytes);
        ssize_t k = ::recv(left_.get(), recv[ri].data + ro, want, 0);
        if (k > 0) {
          ro += static_cast<uint64_t>(k);
          received += static_cast<uint64_t>(k);
          budget -= std::min<uint64_t>(budget, static_cast<uint64_t>(k));
          continue;
        }
        if (k == 0) throw_error(NPG_REMOTE_ERROR, rank_name(left_rank) + " closed the ring connection");
        int err = errno;
        if (err == EINTR) continue;
        if (err == EAGAIN || err == EWOULDBLOCK) break;
        throw_error(NPG_REMOTE_ERROR, "connection to " + rank_name(left_rank) + " lost: " + errno_text(err));
      }
    }
  }
}

void TcpRing::exchange_headers(const GatherArgs& args, const Deadline& deadline) {
  // Ring all-gather of every rank's header so that all ranks reach the same verdict.
  std::vector<uint8_t> headers(static_cast<size_t>(size_) * kHeaderBytes);
  auto at = [&](int32_t r) { return headers.data() + static_cast<size_t>(r) * kHeaderBytes; };
  encode_header(at(rank_), rank_, args.seq, args.send_bytes, args.digest);
  std::vector<Segment> send, recv;
  for (int32_t i = 0; i < size_ - 1; ++i) send.push_back({at((rank_ - i + size_) % size_), kHeaderBytes});
  for (int32_t i = 1; i < size_; ++i) recv.push_back({at((rank_ - i + size_) % size_), kHeaderBytes});
  pump(send, 1, recv, deadline, "header exchange");
  const int32_t left_rank = (rank_ + size_ - 1) % size_;
  std::vector<uint64_t> digest(size_), bytes(size_);
  for (int32_t r = 0; r < size_; ++r) {
    ByteReader rd(at(r), kHeaderBytes);
    uint32_t magic = rd.u32();
    int32_t sender = rd.i32();
    uint64_t seq = rd.u64();
    bytes[r] = rd.u64();
    digest[r] = rd.u64();
    if (magic != kHeaderMagic || sender != r || seq != args.seq) {
      throw_error(NPG_REMOTE_ERROR, rank_name(left_rank) + " forwarded a malformed collective header for rank " +
                                        std::to_string(r) + " (sequence " + std::to_string(seq) + ", expected " +
                                        std::to_string(args.seq) + ")");
    }
  }
  for (int32_t r = 1; r < size_; ++r) {
    if (digest[r] != digest[0]) {
      throw_error(NPG_INVALID_USAGE, "ranks disagree on receive counts: rank " + std::to_string(r) +
                                         "'s recv_counts differ from rank 0's");
    }
  }
  for (int32_t r = 0; r < size_; ++r) {
    if (bytes[r] != args.counts[r]) {
      throw_error(NPG_INVALID_USAGE, "ranks disagree on receive counts: rank " + std::to_string(r) + " sends " +
                                         std::to_string(bytes[r]) + " bytes but recv_counts[" + std::to_string(r) +
                                         "] asks for " + std::to_string(args.counts[r]) + " bytes");
    }
  }
}

void TcpRing::all_gather_v(const GatherArgs& args, const Deadline& deadline) {
  exchange_headers(args, deadline);
  // Send stream: own block, then blocks rank-1, ..., rank-N+2 as they arrive from the left.
  // Receive stream: blocks rank-1, ..., rank-N+1, written straight to their place.
  std::vector<Segment> send, recv;
  for (size_t i = 0; i < args.segment_count; ++i) {
    send.push_back({static_cast<uint8_t*>(const_cast<void*>(args.segments[i].address)), args.segments[i].bytes});
  }
  const size_t own_segments = send.size();
  for (int32_t i = 1; i < size_; ++i) {
    int32_t r = (rank_ - i + size_) % size_;
    Segment s{args.recv + args.displs[r], args.counts[r]};
    recv.push_back(s);
    if (i < size_ - 1) send.push_back(s);
  }
  pump(send, own_segments, recv, deadline, "data exchange");
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
