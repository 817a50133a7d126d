// Sockets for the host backend: owned fds, deadlines, bounded and abortable I/O.
#ifndef NPUGATHER_HOST_SOCKET_UTIL_H_
#define NPUGATHER_HOST_SOCKET_UTIL_H_

#include <stddef.h>
#include <stdint.h>

#include <chrono>
#include <string>

namespace npg {
namespace host {

// Sole owner of a file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  int release() noexcept;
  // Closes the fd; returns the errno of close() or 0.
  int reset() noexcept;
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;
  static Deadline after_ms(int64_t ms);
  Deadline earlier(int64_t ms) const;  // min(this, now + ms)
  bool expired() const { return Clock::now() >= at_; }
  int64_t remaining_ms() const;  // rounded up, >= 0
  int poll_timeout_ms() const;   // remaining_ms capped for poll()
  int64_t budget_ms() const { return budget_ms_; }

 private:
  Clock::time_point at_;
  int64_t budget_ms_ = 0;
};

// IPv4 or IPv6 address with a port; the wire form is 20 bytes.
struct Endpoint {
  uint16_t family = 0;  // AF_INET or AF_INET6
  uint16_t port = 0;
  uint8_t addr[16] = {};
  std::string to_string() const;
};

Endpoint parse_address(const std::string& text);  // numeric or resolvable host name, port 0
// bind_address, else NPUGATHER_HOST_ADDRESS, else first up non-loopback IPv4, else 127.0.0.1.
Endpoint choose_bind_address(const char* bind_address);

// Accept queue of every listener. A flood that fills it has its SYNs dropped (a connector
// tries again after kFirstConnectPatienceMs); a deeper queue would make a rank that got in
// wait behind more of the flood than one poll round drains.
constexpr int kListenBacklog = 512;
// Patience of a first connect attempt for the SYN-ACK; each new attempt doubles it up to
// kMaxConnectPatienceMs, so a SYN lost to a full queue costs a rank this, not the kernel's
// retransmission (a second, then three).
constexpr int64_t kFirstConnectPatienceMs = 100;
constexpr int64_t kMaxConnectPatienceMs = 1000;

// Non-blocking listening socket on addr (port 0 = ephemeral); bound endpoint in *bound.
UniqueFd listen_on(const Endpoint& addr, Endpoint* bound);
Endpoint local_endpoint(int fd);
Endpoint peer_endpoint(int fd);

// Connects (non-blocking socket, TCP_NODELAY), retrying refused and unanswered connections
// (each with its patience, above) until the deadline.
UniqueFd connect_with_retry(const Endpoint& to, const Deadline& deadline, const std::string& peer);

// Waits on fd for events. Throws NPG_TIMEOUT at the deadline; when cancel_fd (may be -1)
// becomes readable returns 0 so the caller decides what that means.
short wait_fd(int fd, short events, const Deadline& deadline, int cancel_fd, const std::string& what);

// Accepts one connection (non-blocking, TCP_NODELAY); returns an empty fd when cancel_fd fired.
UniqueFd accept_one(int listen_fd, const Deadline& deadline, int cancel_fd, const std::string& what);

// Exact-length I/O on a non-blocking socket. EOF/reset -> NPG_REMOTE_ERROR naming peer.
// cancel_fd readable -> NPG_ABORTED.
void send_all(int fd, const void* data, size_t len, const Deadline& deadline, int cancel_fd, const std::string& peer);
void recv_all(int fd, void* data, size_t len, const Deadline& deadline, int cancel_fd, const std::string& peer);

void set_nonblocking(int fd);
void set_nodelay(int fd);

// Equal iff both ranges hold the same bytes; time independent of where they differ.
bool constant_time_equal(const uint8_t* a, const uint8_t* b, size_t len);
void fill_random(void* data, size_t len);

}  // namespace host
}  // namespace npg

#endif  // NPUGATHER_HOST_SOCKET_UTIL_H_
