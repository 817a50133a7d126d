#include "tcp_frames.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>

#include <algorithm>
#include <vector>

#include "../core/block_copy.h"
#include "../core/error.h"
#include "wire.h"

namespace npg {
namespace host {
namespace {

constexpr size_t kFollowingOffset = 32;  // where the following field starts in a header

int socket_error(int fd) {
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  return err;
}

[[noreturn]] void throw_lost(int32_t peer, int err) {
  throw_error(NPG_REMOTE_ERROR, "connection to " + rank_name(peer) + " lost: " + errno_text(err));
}

}  // namespace

void BlockHeader::encode(uint8_t* out) const {
  ByteWriter w;
  w.u32(magic);
  w.i32(rank);
  w.u64(seq);
  w.u64(bytes);
  w.u64(digest);
  w.u64(following);
  memset(out, 0, kBytes);
  memcpy(out, w.data().data(), w.data().size());
}

BlockHeader BlockHeader::decode(const uint8_t* in) {
  ByteReader r(in, kBytes);
  BlockHeader h;
  h.magic = r.u32();
  h.rank = r.i32();
  h.seq = r.u64();
  h.bytes = r.u64();
  h.digest = r.u64();
  h.following = r.u64();
  return h;
}

void BlockHeader::set_following(uint8_t* header, uint64_t following) {
  ByteWriter w;
  w.u64(following);
  memcpy(header + kFollowingOffset, w.data().data(), 8);
}

std::string rank_name(int32_t r) { return "rank " + std::to_string(r); }

void SendStream::add(const uint8_t* data, uint64_t len, uint64_t ready) {
  pieces_.push_back({data, len, ready});
  total_ += len;
}

bool SendStream::can_send() {
  while (index_ < pieces_.size() && offset_ == pieces_[index_].len) {
    ++index_;
    offset_ = 0;
  }
  return index_ < pieces_.size() && offset_ < pieces_[index_].ready;
}

void SendStream::send_ready(int fd, int32_t peer, uint64_t budget) {
  while (budget > 0 && can_send()) {
    // The pieces ready in full and the ready part of the next.
    iovec iov[kSendIovecs];
    int count = 0;
    uint64_t want = 0;
    for (size_t i = index_, skip = offset_; i < pieces_.size() && count < kSendIovecs && want < kIoChunkBytes;
         ++i, skip = 0) {
      const uint64_t take = std::min(pieces_[i].ready - skip, kIoChunkBytes - want);
      if (take > 0) {
        iov[count++] = {const_cast<uint8_t*>(pieces_[i].data) + skip, take};
        want += take;
      }
      if (pieces_[i].ready < pieces_[i].len) break;  // the rest of this piece has not arrived yet
    }
    const uint64_t k = send_some(fd, iov, count, peer);
    if (k == 0) return;
    sent_ += k;
    budget -= std::min(budget, k);
    for (uint64_t advance = k; advance > 0;) {
      while (offset_ == pieces_[index_].len) {
        ++index_;
        offset_ = 0;
      }
      const uint64_t step = std::min(advance, pieces_[index_].len - offset_);
      offset_ += step;
      advance -= step;
    }
  }
}

iovec receive_span(bool in_header, uint8_t* header, uint8_t* dst, uint64_t following, uint64_t got,
                   std::vector<uint8_t>& scratch) {
  if (in_header) return {header + got, BlockHeader::kBytes - got};
  const uint64_t want = std::min(following - got, kIoChunkBytes);
  if (dst != nullptr) return {dst + got, want};
  if (scratch.empty()) scratch.resize(kIoChunkBytes);
  return {scratch.data(), want};
}

int64_t LinkReader::read(int fd, uint8_t* into, uint64_t want, int32_t peer) {
  if (!buffered()) {
    if (want >= kBufferBytes) return recv_some(fd, into, want, peer);
    if (buffer_.empty()) buffer_.resize(kBufferBytes);
    const int64_t k = recv_some(fd, buffer_.data(), kBufferBytes, peer);
    if (k <= 0) return k;
    begin_ = 0;
    end_ = static_cast<size_t>(k);
  }
  const size_t take = static_cast<size_t>(std::min<uint64_t>(want, end_ - begin_));
  copy_block(into, buffer_.data() + begin_, take);
  begin_ += take;
  return static_cast<int64_t>(take);
}

int64_t LinkReader::read_header_and_body(int fd, uint8_t* header, uint8_t* body, uint64_t body_len, int32_t peer) {
  iovec iov[2] = {{header, BlockHeader::kBytes}, {body, body_len}};
  return recv_some_v(fd, iov, body_len > 0 ? 2 : 1, peer);
}

void LinkReader::unread(const uint8_t* bytes, uint64_t len) {
  if (len == 0) return;
  std::vector<uint8_t> rest(buffer_.begin() + static_cast<std::ptrdiff_t>(begin_),
                            buffer_.begin() + static_cast<std::ptrdiff_t>(end_));
  buffer_.assign(bytes, bytes + len);
  buffer_.insert(buffer_.end(), rest.begin(), rest.end());
  begin_ = 0;
  end_ = buffer_.size();
  if (buffer_.size() < kBufferBytes) buffer_.resize(kBufferBytes);
}

void judge_layout(const uint8_t* headers, const GatherArgs& args, int32_t size) {
  std::vector<BlockHeader> all;
  all.reserve(static_cast<size_t>(size));
  for (int32_t r = 0; r < size; ++r)
    all.push_back(BlockHeader::decode(headers + static_cast<size_t>(r) * BlockHeader::kBytes));
  const std::string rejected =
      rejection_verdict(args, size, [&](int32_t r) { return std::make_pair(all[r].digest, all[r].bytes); });
  if (!rejected.empty()) throw_error(NPG_INVALID_USAGE, rejected);
  for (int32_t r = 1; r < size; ++r) {
    if (all[r].digest != all[0].digest) {
      throw_error(NPG_INVALID_USAGE, "ranks disagree on receive counts: rank " + std::to_string(r) +
                                         "'s recv_counts differ from rank 0's");
    }
  }
  for (int32_t r = 0; r < size; ++r) {
    if (all[r].bytes != args.counts[r]) {
      throw_error(NPG_INVALID_USAGE, "ranks disagree on receive counts: rank " + std::to_string(r) + " sends " +
                                         std::to_string(all[r].bytes) + " bytes but recv_counts[" + std::to_string(r) +
                                         "] asks for " + std::to_string(args.counts[r]) + " bytes");
    }
  }
}

LinkWaiter::LinkWaiter(LinkSpin spin, const Deadline& deadline, const AbortSignal& abort)
    : spin_(spin), deadline_(deadline), abort_(abort), idle_since_(std::chrono::steady_clock::now()) {}

bool LinkWaiter::wait(pollfd* fds, nfds_t n, nfds_t links) {
  if (abort_.triggered()) throw_aborted();
  if (try_first_) {
    for (nfds_t i = 0; i < n; ++i) fds[i].revents = i < links ? fds[i].events : 0;
    return true;
  }
  int rc = poll(fds, n, 0);
  if (rc == 0) {
    const auto now = std::chrono::steady_clock::now();
    if (now - idle_since_ < spin_.budget) {
      if (spin_.yield) sched_yield();
      return false;
    }
    int timeout = deadline_.poll_timeout_ms();
    if (wake_by_ != std::chrono::steady_clock::time_point::max()) {
      if (wake_by_ <= now) return false;
      const auto until = std::chrono::ceil<std::chrono::milliseconds>(wake_by_ - now).count();
      timeout = static_cast<int>(std::min<int64_t>(timeout, until));
    }
    rc = poll(fds, n, timeout);
  }
  idle_since_ = std::chrono::steady_clock::now();
  if (rc < 0) {
    if (errno == EINTR) return false;
    throw_system_error("poll", errno);
  }
  if (fds[n - 1].revents != 0 || abort_.triggered()) throw_aborted();
  return rc > 0;
}

void LinkWaiter::stepped(bool moved) {
  try_first_ = moved;
  if (moved) idle_since_ = std::chrono::steady_clock::now();
}

bool send_urgent(int fd, uint8_t byte) noexcept {
  return send(fd, &byte, 1, MSG_OOB | MSG_DONTWAIT | MSG_NOSIGNAL) == 1;
}

int recv_urgent(int fd) noexcept {
  uint8_t byte = 0;
  return recv(fd, &byte, 1, MSG_OOB | MSG_DONTWAIT) == 1 ? byte : -1;
}

bool send_signal_frame(int fd, int32_t sender, uint64_t seq, uint8_t signal) noexcept {
  uint8_t frame[BlockHeader::kBytes];
  BlockHeader{kSignalMagic, sender, seq, signal, 0, 0}.encode(frame);
  return send(fd, frame, sizeof(frame), MSG_DONTWAIT | MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof(frame));
}

uint8_t urgent_notice(uint8_t kind, int32_t sender, int32_t culprit, int32_t size) {
  const int64_t distance = culprit < 0 ? kUrgentFar : ((int64_t{sender} - culprit) % size + size) % size;
  return static_cast<uint8_t>(kind | std::min<int64_t>(distance, kUrgentFar));
}

int32_t urgent_culprit(int byte, int32_t sender, int32_t size) {
  const int distance = byte & kUrgentFar;
  if (distance == kUrgentFar) return -1;
  return static_cast<int32_t>(((int64_t{sender} - distance) % size + size) % size);
}

uint64_t send_some(int fd, const iovec* iov, int count, int32_t peer) {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<size_t>(count);
  for (;;) {
    ssize_t k = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (k > 0) return static_cast<uint64_t>(k);
    int err = k < 0 ? errno : socket_error(fd);
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) return 0;
    throw_lost(peer, err);
  }
}

int64_t recv_some_v(int fd, iovec* iov, int count, int32_t peer) {
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = static_cast<size_t>(count);
  for (;;) {
    ssize_t k = recvmsg(fd, &msg, 0);
    if (k > 0) return k;
    if (k == 0) return -1;
    int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) return 0;
    throw_lost(peer, err);
  }
}

int64_t recv_some(int fd, void* into, uint64_t want, int32_t peer) {
  iovec iov{into, want};
  return recv_some_v(fd, &iov, 1, peer);
}

}  // namespace host
}  // namespace npg
