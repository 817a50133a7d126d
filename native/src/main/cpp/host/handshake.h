// Challenge-response admission of connections to the root's bootstrap listener and to a
// rank's ring listener. The acceptor sends a fresh nonce; the connector answers with its
// own nonce, its payload and an HMAC-SHA-256 keyed by the communicator secret over both
// nonces and the payload; the acceptor answers with its own MAC over the same. The secret
// never crosses the wire and a recorded exchange cannot be replayed.
//
// The acceptor runs every pending handshake at once on non-blocking sockets, each with a
// deadline for the whole handshake and a bounded number per peer address; each poll round
// serves the connections with something to read before it drains the accept queue, and a
// newcomer over a limit evicts the oldest stranger that has sent nothing useful (one whose
// response has begun goes last). A connector that gets no challenge in time connects again.
// So a stranger (silent, slow, garbage or a flood, even from the ranks' own address) costs an
// authenticated rank at most a poll round and a reconnection, not a turn behind the flood.
#ifndef NPUGATHER_HOST_HANDSHAKE_H_
#define NPUGATHER_HOST_HANDSHAKE_H_

#include <stddef.h>
#include <stdint.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "root_info.h"
#include "socket_util.h"
#include "wire.h"

namespace npg {
namespace host {

enum class HandshakePurpose : uint8_t { kBootstrap = 1, kRing = 2 };

constexpr size_t kNonceBytes = 16;
constexpr int64_t kHandshakeMs = 2000;  // whole handshake, from accept to the connector's MAC
// Ranks may share their address with a flood: a rank has as long to answer its challenge as
// the acceptor takes to accept kMaxPendingPerAddress more connections.
constexpr size_t kMaxPendingPerAddress = 256;  // more from one address evict one of its own
constexpr size_t kMaxPending = 512;            // more in total evict one

// Connector side, driven by poll readiness so that a ring rank can run it while it
// accepts its own left neighbour. When the acceptor drops the connection with a retry
// frame (it made room for newer ones), or sends no challenge within the patience (the
// connection may wait in a flooded accept queue, or have been lost from it), the handshake
// starts again on a new connection, with twice the patience (kFirstConnectPatienceMs up to
// kMaxConnectPatienceMs).
class ClientHandshake {
 public:
  ClientHandshake(UniqueFd fd, const Endpoint& to, const HostRootInfo& info, HandshakePurpose purpose,
                  std::vector<uint8_t> payload, std::string peer);
  bool done() const { return state_ == State::kDone; }
  int fd() const { return fd_.get(); }
  // Runs what the socket allows; throws NPG_REMOTE_ERROR when the acceptor fails to prove
  // the secret or closes the connection.
  void on_ready(const Deadline& deadline);
  // Reconnects when the challenge is overdue; call when on_ready was not called for a
  // poll of at most wait_ms().
  void on_tick(const Deadline& deadline);
  // How long a poll for this handshake may wait: until the deadline or the challenge is due.
  int wait_ms(const Deadline& deadline) const;
  // Runs to the end; false when cancel_fd became readable first.
  bool finish(const Deadline& deadline, int cancel_fd);
  UniqueFd take_fd() { return std::move(fd_); }

 private:
  enum class State { kAwaitChallenge, kAwaitProof, kDone };
  void restart(const Deadline& deadline);
  UniqueFd fd_;
  Endpoint to_;
  HostRootInfo info_;
  HandshakePurpose purpose_;
  std::vector<uint8_t> payload_;
  std::string peer_;
  State state_ = State::kAwaitChallenge;
  int64_t patience_ms_ = kFirstConnectPatienceMs;
  Deadline challenge_due_ = Deadline::after_ms(kFirstConnectPatienceMs);
  FrameAssembler frame_;
  uint8_t server_nonce_[kNonceBytes] = {};
  uint8_t client_nonce_[kNonceBytes] = {};
};

struct AdmittedConnection {
  UniqueFd fd;  // empty when the wait was cancelled
  Endpoint peer;
  std::vector<uint8_t> payload;
};

// Acceptor side: admits connections on listener that prove the secret.
class Admission {
 public:
  // owner names the accepting rank in log lines, e.g. "root rank 0".
  Admission(int listener, const HostRootInfo& info, HandshakePurpose purpose, size_t max_payload, std::string owner);
  ~Admission();
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;

  // The next admitted connection, driving also (may be null) meanwhile. An empty fd when
  // cancel_fd became readable; NPG_TIMEOUT "timed out after N ms <what>" at the deadline.
  AdmittedConnection next(const Deadline& deadline, int cancel_fd, ClientHandshake* also, const std::string& what);
  // For a connection that proved the secret but is refused by its payload.
  void reject(const AdmittedConnection& connection, const std::string& why);
  // "" or e.g. "; 12 connections that did not prove the secret were dropped".
  std::string drop_summary() const;
  // The connections admitted but not yet returned by next(), e.g. to tell them a failure.
  std::vector<UniqueFd> take_admitted();

 private:
  struct Pending;
  void accept_ready();
  void make_room(const Endpoint& peer);
  void progress(Pending& p);
  void drop(Pending& p, const std::string& why, bool invite_retry);
  void log_drop(const Endpoint& peer, const std::string& why);

  int listener_;
  HostRootInfo info_;
  HandshakePurpose purpose_;
  size_t max_payload_;
  std::string owner_;
  std::vector<std::unique_ptr<Pending>> pending_;
  std::deque<AdmittedConnection> admitted_;
  int64_t dropped_ = 0;
  int64_t log_window_start_ms_ = -1;
  int64_t logged_in_window_ = 0;
  int64_t suppressed_ = 0;
};

}  // namespace host
}  // namespace npg

#endif  // NPUGATHER_HOST_HANDSHAKE_H_
