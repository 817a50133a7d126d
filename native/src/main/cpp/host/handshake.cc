#include "handshake.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>

#include "../core/error.h"
#include "hmac_sha256.h"

namespace npg {
namespace host {
namespace {

constexpr uint32_t kHandshakeVersion = 1;
constexpr size_t kChallengeBytes = 4 + 1 + kIdBytes + kNonceBytes;
constexpr size_t kResponseOverhead = kNonceBytes + kSha256Bytes;
constexpr int64_t kLogWindowMs = 1000;
constexpr int64_t kLogLinesPerWindow = 5;

const char* purpose_name(HandshakePurpose purpose) {
  return purpose == HandshakePurpose::kBootstrap ? "bootstrap" : "ring";
}

// role "connector" or "acceptor": the two MACs differ even over the same nonces.
void handshake_mac(const HostRootInfo& info, const char* role, HandshakePurpose purpose, const uint8_t* server_nonce,
                   const uint8_t* client_nonce, const std::vector<uint8_t>& payload, uint8_t out[kSha256Bytes]) {
  static const char kLabel[] = "npugather handshake v1";
  HmacSha256 mac(info.secret, kSecretBytes);
  const uint8_t purpose_byte = static_cast<uint8_t>(purpose);
  ByteWriter length;
  length.u32(static_cast<uint32_t>(payload.size()));
  mac.update(kLabel, sizeof(kLabel))
      .update(role, strlen(role) + 1)
      .update(&purpose_byte, 1)
      .update(info.id, kIdBytes)
      .update(server_nonce, kNonceBytes)
      .update(client_nonce, kNonceBytes)
      .update(length.data().data(), length.data().size())
      .update(payload.data(), payload.size());
  mac.finish(out);
}

std::vector<uint8_t> frame_bytes(FrameType type, const std::vector<uint8_t>& body) {
  ByteWriter w;
  w.u32(kFrameMagic);
  w.u32(static_cast<uint32_t>(type));
  w.u32(static_cast<uint32_t>(body.size()));
  w.bytes(body.data(), body.size());
  return w.data();
}

// One non-blocking send of a small frame to a connection nobody trusts yet: all or nothing.
bool send_small_frame(int fd, FrameType type, const std::vector<uint8_t>& body) {
  std::vector<uint8_t> bytes = frame_bytes(type, body);
  ssize_t n;
  do {
    n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(bytes.size());
}

bool same_address(const Endpoint& a, const Endpoint& b) {
  return a.family == b.family && memcmp(a.addr, b.addr, sizeof(a.addr)) == 0;
}

int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

ClientHandshake::ClientHandshake(UniqueFd fd, const Endpoint& to, const HostRootInfo& info, HandshakePurpose purpose,
                                 std::vector<uint8_t> payload, std::string peer)
    : fd_(std::move(fd)),
      to_(to),
      info_(info),
      purpose_(purpose),
      payload_(std::move(payload)),
      peer_(std::move(peer)) {}

void ClientHandshake::restart(const Deadline& deadline) {
  fd_.reset();
  fd_ = connect_with_retry(to_, deadline, peer_);
  frame_.reset();
  state_ = State::kAwaitChallenge;
  patience_ms_ = std::min(patience_ms_ * 2, kMaxConnectPatienceMs);
  challenge_due_ = Deadline::after_ms(patience_ms_);
}

void ClientHandshake::on_tick(const Deadline& deadline) {
  if (state_ == State::kAwaitChallenge && challenge_due_.expired() && !deadline.expired()) restart(deadline);
}

int ClientHandshake::wait_ms(const Deadline& deadline) const {
  int ms = deadline.poll_timeout_ms();
  if (state_ == State::kAwaitChallenge) ms = static_cast<int>(std::min<int64_t>(ms, challenge_due_.remaining_ms()));
  return ms;
}

void ClientHandshake::on_ready(const Deadline& deadline) {
  while (state_ != State::kDone) {
    const bool challenge = state_ == State::kAwaitChallenge;
    FrameAssembler::Status status = frame_.read_some(fd_.get(), challenge ? FrameType::kChallenge : FrameType::kProof,
                                                     challenge ? kChallengeBytes : kSha256Bytes, true, peer_);
    if (status == FrameAssembler::Status::kIncomplete) return;
    if (status == FrameAssembler::Status::kClosed) {
      throw_error(NPG_REMOTE_ERROR, peer_ + " at " + to_.to_string() + " closed the connection during the handshake");
    }
    if (frame_.type() == FrameType::kRetry) {
      restart(deadline);
      continue;
    }
    ByteReader r(frame_.body());
    if (challenge) {
      uint32_t version = r.u32();
      uint8_t purpose = r.u8();
      uint8_t id[kIdBytes];
      r.bytes(id, kIdBytes);
      r.bytes(server_nonce_, kNonceBytes);
      r.expect_end();
      if (version != kHandshakeVersion || purpose != static_cast<uint8_t>(purpose_) ||
          memcmp(id, info_.id, kIdBytes) != 0) {
        throw_error(NPG_REMOTE_ERROR, peer_ + " at " + to_.to_string() + " is not a " + purpose_name(purpose_) +
                                          " endpoint of this communicator (handshake version " +
                                          std::to_string(version) + ", purpose " + std::to_string(purpose) + ")");
      }
      fill_random(client_nonce_, kNonceBytes);
      uint8_t mac[kSha256Bytes];
      handshake_mac(info_, "connector", purpose_, server_nonce_, client_nonce_, payload_, mac);
      ByteWriter w;
      w.bytes(client_nonce_, kNonceBytes);
      w.bytes(mac, kSha256Bytes);
      w.bytes(payload_.data(), payload_.size());
      send_frame(fd_.get(), FrameType::kResponse, w.data(), deadline, peer_);
      frame_.reset();
      state_ = State::kAwaitProof;
    } else {
      uint8_t proof[kSha256Bytes];
      r.bytes(proof, kSha256Bytes);
      r.expect_end();
      uint8_t expected[kSha256Bytes];
      handshake_mac(info_, "acceptor", purpose_, server_nonce_, client_nonce_, payload_, expected);
      if (!constant_time_equal(proof, expected, kSha256Bytes)) {
        throw_error(NPG_REMOTE_ERROR, peer_ + " at " + to_.to_string() + " did not prove the communicator secret");
      }
      state_ = State::kDone;
    }
  }
}

bool ClientHandshake::finish(const Deadline& deadline, int cancel_fd) {
  while (!done()) {
    if (deadline.expired()) {
      throw_error(NPG_TIMEOUT,
                  "timed out after " + std::to_string(deadline.budget_ms()) + " ms in the handshake with " + peer_);
    }
    pollfd fds[2] = {{fd_.get(), POLLIN, 0}, {cancel_fd, POLLIN, 0}};
    int rc = poll(fds, cancel_fd >= 0 ? 2 : 1, wait_ms(deadline));
    if (rc < 0) {
      if (errno == EINTR) continue;
      throw_system_error("poll", errno);
    }
    if (cancel_fd >= 0 && (fds[1].revents & (POLLIN | POLLERR | POLLHUP))) return false;
    if (fds[0].revents != 0) {
      on_ready(deadline);
    } else {
      on_tick(deadline);
    }
  }
  return true;
}

struct Admission::Pending {
  UniqueFd fd;
  Endpoint peer;
  Deadline deadline;
  uint8_t nonce[kNonceBytes] = {};
  FrameAssembler frame;
  bool finished = false;
};

Admission::Admission(int listener, const HostRootInfo& info, HandshakePurpose purpose, size_t max_payload,
                     std::string owner)
    : listener_(listener), info_(info), purpose_(purpose), max_payload_(max_payload), owner_(std::move(owner)) {}

Admission::~Admission() = default;

void Admission::log_drop(const Endpoint& peer, const std::string& why) {
  ++dropped_;
  // A flood must not become a flood of log lines: a few per window, then a count.
  int64_t now = steady_ms();
  if (log_window_start_ms_ < 0 || now - log_window_start_ms_ >= kLogWindowMs) {
    if (suppressed_ > 0) {
      fprintf(stderr, "npugather: %s dropped %lld more %s connections in the last %lld ms\n", owner_.c_str(),
              static_cast<long long>(suppressed_), purpose_name(purpose_), static_cast<long long>(kLogWindowMs));
    }
    log_window_start_ms_ = now;
    logged_in_window_ = 0;
    suppressed_ = 0;
  }
  if (logged_in_window_ >= kLogLinesPerWindow) {
    ++suppressed_;
    return;
  }
  ++logged_in_window_;
  fprintf(stderr, "npugather: %s dropped a %s connection from %s: %s\n", owner_.c_str(), purpose_name(purpose_),
          peer.to_string().c_str(), why.c_str());
}

void Admission::drop(Pending& p, const std::string& why, bool invite_retry) {
  if (invite_retry) send_small_frame(p.fd.get(), FrameType::kRetry, {});
  log_drop(p.peer, why);
  p.fd.reset();
  p.finished = true;
}

void Admission::reject(const AdmittedConnection& connection, const std::string& why) { log_drop(connection.peer, why); }

std::vector<UniqueFd> Admission::take_admitted() {
  std::vector<UniqueFd> fds;
  for (auto& c : admitted_) fds.push_back(std::move(c.fd));
  admitted_.clear();
  return fds;
}

std::string Admission::drop_summary() const {
  if (dropped_ == 0) return "";
  return "; " + std::to_string(dropped_) + " connection" + (dropped_ == 1 ? "" : "s") +
         " that did not complete the handshake " + (dropped_ == 1 ? "was" : "were") + " dropped";
}

// Frees a pending slot when the newcomer's address, then everyone, has as many as allowed. The
// oldest that has sent nothing useful makes way, after a last read of what it sent meanwhile (a
// rank's response may have just arrived, a stranger may have closed); only when there is none,
// the oldest whose response has begun.
void Admission::make_room(const Endpoint& peer) {
  for (bool per_address : {true, false}) {
    const size_t limit = per_address ? kMaxPendingPerAddress : kMaxPending;
    for (;;) {
      size_t count = 0;
      Pending* silent = nullptr;
      Pending* begun = nullptr;
      for (auto& q : pending_) {
        if (q->finished || (per_address && !same_address(q->peer, peer))) continue;
        ++count;
        if (q->frame.begins(FrameType::kResponse)) {
          if (begun == nullptr) begun = q.get();
        } else if (silent == nullptr) {
          silent = q.get();
        }
      }
      if (count < limit) break;
      const std::string why = per_address ? "more than " + std::to_string(limit) + " handshakes from one address"
                                          : "more than " + std::to_string(limit) + " handshakes at once";
      if (silent == nullptr) {
        drop(*begun, why, true);
        break;
      }
      progress(*silent);
      if (silent->finished || silent->frame.begins(FrameType::kResponse)) continue;  // look again
      drop(*silent, why + " (it had sent nothing)", true);
      break;
    }
  }
}

void Admission::accept_ready() {
  // Drains the accept queue: a rank in it waits no longer than this round.
  for (int i = 0; i < kListenBacklog; ++i) {
    sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    UniqueFd fd(accept4(listener_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) {
      int err = errno;
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      // Out of fds or buffers: what is pending still completes; try again next round.
      if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) return;
      throw_system_error("accept", err);
    }
    set_nodelay(fd.get());
    auto p = std::make_unique<Pending>();
    p->peer = peer_endpoint(fd.get());
    p->fd = std::move(fd);
    p->deadline = Deadline::after_ms(kHandshakeMs);
    fill_random(p->nonce, kNonceBytes);
    ByteWriter challenge;
    challenge.u32(kHandshakeVersion);
    challenge.u8(static_cast<uint8_t>(purpose_));
    challenge.bytes(info_.id, kIdBytes);
    challenge.bytes(p->nonce, kNonceBytes);
    if (!send_small_frame(p->fd.get(), FrameType::kChallenge, challenge.data())) {
      drop(*p, "could not send the challenge", false);
      continue;  // reset by its peer already: it makes nobody make way
    }
    // Room, so a newcomer (a real rank) always gets its turn.
    make_room(p->peer);
    pending_.push_back(std::move(p));
  }
}

void Admission::progress(Pending& p) {
  try {
    FrameAssembler::Status status =
        p.frame.read_some(p.fd.get(), FrameType::kResponse, kResponseOverhead + max_payload_, false, "connection");
    if (status == FrameAssembler::Status::kIncomplete) return;
    if (status == FrameAssembler::Status::kClosed) {
      drop(p, "closed before completing the handshake", false);
      return;
    }
    ByteReader r(p.frame.body());
    uint8_t client_nonce[kNonceBytes];
    uint8_t mac[kSha256Bytes];
    r.bytes(client_nonce, kNonceBytes);
    r.bytes(mac, kSha256Bytes);
    std::vector<uint8_t> payload(p.frame.body().begin() + kResponseOverhead, p.frame.body().end());
    uint8_t expected[kSha256Bytes];
    handshake_mac(info_, "connector", purpose_, p.nonce, client_nonce, payload, expected);
    if (!constant_time_equal(mac, expected, kSha256Bytes)) {
      drop(p, "did not prove the communicator secret", false);
      return;
    }
    uint8_t proof[kSha256Bytes];
    handshake_mac(info_, "acceptor", purpose_, p.nonce, client_nonce, payload, proof);
    if (!send_small_frame(p.fd.get(), FrameType::kProof, std::vector<uint8_t>(proof, proof + kSha256Bytes))) {
      drop(p, "could not send the proof", false);
      return;
    }
    admitted_.push_back(AdmittedConnection{std::move(p.fd), p.peer, std::move(payload)});
    p.finished = true;
  } catch (const Error& e) {
    drop(p, e.what(), false);
  }
}

AdmittedConnection Admission::next(const Deadline& deadline, int cancel_fd, ClientHandshake* also,
                                   const std::string& what) {
  for (;;) {
    if (!admitted_.empty()) {
      AdmittedConnection c = std::move(admitted_.front());
      admitted_.pop_front();
      return c;
    }
    if (deadline.expired()) {
      throw_error(NPG_TIMEOUT, "timed out after " + std::to_string(deadline.budget_ms()) + " ms " + what);
    }
    std::vector<pollfd> fds;
    fds.push_back({listener_, POLLIN, 0});
    int cancel_i = -1;
    int also_i = -1;
    if (cancel_fd >= 0) {
      cancel_i = static_cast<int>(fds.size());
      fds.push_back({cancel_fd, POLLIN, 0});
    }
    int timeout_ms = deadline.poll_timeout_ms();
    if (also != nullptr && !also->done()) {
      also_i = static_cast<int>(fds.size());
      fds.push_back({also->fd(), POLLIN, 0});
      timeout_ms = std::min(timeout_ms, also->wait_ms(deadline));
    }
    const size_t first_pending = fds.size();
    for (auto& p : pending_) {
      fds.push_back({p->fd.get(), POLLIN, 0});
      timeout_ms = std::min<int64_t>(timeout_ms, p->deadline.remaining_ms());
    }
    int rc = poll(fds.data(), fds.size(), timeout_ms);
    if (rc < 0) {
      if (errno == EINTR) continue;
      throw_system_error("poll", errno);
    }
    if (cancel_i >= 0 && (fds[cancel_i].revents & (POLLIN | POLLERR | POLLHUP))) return AdmittedConnection();
    if (also_i >= 0) {
      if (fds[also_i].revents != 0) {
        also->on_ready(deadline);
      } else {
        also->on_tick(deadline);
      }
    }
    for (size_t i = 0; i < pending_.size(); ++i) {
      Pending& p = *pending_[i];
      if (fds[first_pending + i].revents != 0) progress(p);
      if (!p.finished && p.deadline.expired()) {
        drop(p, "did not complete the handshake within " + std::to_string(kHandshakeMs) + " ms", true);
      }
    }
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(), [](const auto& p) { return p->finished; }),
                   pending_.end());
    if (fds[0].revents != 0) accept_ready();
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(), [](const auto& p) { return p->finished; }),
                   pending_.end());
  }
}

}  // namespace host
}  // namespace npg
