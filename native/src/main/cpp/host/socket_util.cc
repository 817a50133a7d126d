#include "socket_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <thread>

#include "../core/error.h"

namespace npg {
namespace host {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

int UniqueFd::release() noexcept {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

int UniqueFd::reset() noexcept {
  int err = 0;
  if (fd_ >= 0 && ::close(fd_) != 0 && errno != EINTR) err = errno;
  fd_ = -1;
  return err;
}

Deadline Deadline::after_ms(int64_t ms) {
  Deadline d;
  d.budget_ms_ = ms;
  auto now = Clock::now();
  // Saturate: timeouts of years must not overflow the clock.
  const int64_t kMaxMs = int64_t(1) << 40;
  d.at_ = now + std::chrono::milliseconds(std::min(ms, kMaxMs));
  return d;
}

Deadline Deadline::earlier(int64_t ms) const {
  Deadline d = *this;
  auto other = Clock::now() + std::chrono::milliseconds(ms);
  if (other < d.at_) {
    d.at_ = other;
    d.budget_ms_ = ms;
  }
  return d;
}

int64_t Deadline::remaining_ms() const {
  auto left = at_ - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  return std::chrono::duration_cast<std::chrono::milliseconds>(left + std::chrono::microseconds(999)).count();
}

int Deadline::poll_timeout_ms() const { return static_cast<int>(std::min<int64_t>(remaining_ms(), 1000)); }

std::string Endpoint::to_string() const {
  char buf[INET6_ADDRSTRLEN] = "?";
  inet_ntop(family == AF_INET6 ? AF_INET6 : AF_INET, addr, buf, sizeof(buf));
  if (family == AF_INET6) return std::string("[") + buf + "]:" + std::to_string(port);
  return std::string(buf) + ":" + std::to_string(port);
}

namespace {

socklen_t to_sockaddr(const Endpoint& ep, sockaddr_storage* ss) {
  memset(ss, 0, sizeof(*ss));
  if (ep.family == AF_INET6) {
    auto* sa = reinterpret_cast<sockaddr_in6*>(ss);
    sa->sin6_family = AF_INET6;
    sa->sin6_port = htons(ep.port);
    memcpy(&sa->sin6_addr, ep.addr, 16);
    return sizeof(sockaddr_in6);
  }
  auto* sa = reinterpret_cast<sockaddr_in*>(ss);
  sa->sin_family = AF_INET;
  sa->sin_port = htons(ep.port);
  memcpy(&sa->sin_addr, ep.addr, 4);
  return sizeof(sockaddr_in);
}

Endpoint from_sockaddr(const sockaddr* sa) {
  Endpoint ep;
  if (sa->sa_family == AF_INET6) {
    auto* s6 = reinterpret_cast<const sockaddr_in6*>(sa);
    ep.family = AF_INET6;
    ep.port = ntohs(s6->sin6_port);
    memcpy(ep.addr, &s6->sin6_addr, 16);
  } else {
    auto* s4 = reinterpret_cast<const sockaddr_in*>(sa);
    ep.family = AF_INET;
    ep.port = ntohs(s4->sin_port);
    memcpy(ep.addr, &s4->sin_addr, 4);
  }
  return ep;
}

bool would_block(int err) { return err == EAGAIN || err == EWOULDBLOCK; }

bool is_connection_loss(int err) {
  return err == ECONNRESET || err == EPIPE || err == ENOTCONN || err == ECONNABORTED || err == ETIMEDOUT ||
         err == EHOSTUNREACH || err == ENETUNREACH;
}

}  // namespace

Endpoint parse_address(const std::string& text) {
  Endpoint ep;
  if (inet_pton(AF_INET, text.c_str(), ep.addr) == 1) {
    ep.family = AF_INET;
    return ep;
  }
  if (inet_pton(AF_INET6, text.c_str(), ep.addr) == 1) {
    ep.family = AF_INET6;
    return ep;
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_family = AF_UNSPEC;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(text.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    throw_error(NPG_INVALID_ARGUMENT,
                "bind_address '" + text + "' is not an IPv4/IPv6 address or resolvable host: " + gai_strerror(rc));
  }
  ep = from_sockaddr(res->ai_addr);
  ep.port = 0;
  freeaddrinfo(res);
  return ep;
}

Endpoint choose_bind_address(const char* bind_address) {
  if (bind_address != nullptr && bind_address[0] != '\0') return parse_address(bind_address);
  const char* env = getenv("NPUGATHER_HOST_ADDRESS");
  if (env != nullptr && env[0] != '\0') return parse_address(env);
  ifaddrs* list = nullptr;
  Endpoint chosen = parse_address("127.0.0.1");
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
      if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
      if (!(it->ifa_flags & IFF_UP) || (it->ifa_flags & IFF_LOOPBACK)) continue;
      chosen = from_sockaddr(it->ifa_addr);
      chosen.port = 0;
      break;
    }
    freeifaddrs(list);
  }
  return chosen;
}

void set_nonblocking(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) throw_system_error("fcntl(O_NONBLOCK)", errno);
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // best effort: latency only
}

UniqueFd listen_on(const Endpoint& addr, Endpoint* bound) {
  UniqueFd fd(socket(addr.family == AF_INET6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) throw_system_error("socket", errno);
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_storage ss;
  socklen_t len = to_sockaddr(addr, &ss);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    throw_system_error("bind to " + addr.to_string(), errno);
  }
  if (listen(fd.get(), kListenBacklog) != 0) throw_system_error("listen on " + addr.to_string(), errno);
  if (bound != nullptr) *bound = local_endpoint(fd.get());
  return fd;
}

Endpoint local_endpoint(int fd) {
  sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) throw_system_error("getsockname", errno);
  return from_sockaddr(reinterpret_cast<sockaddr*>(&ss));
}

Endpoint peer_endpoint(int fd) {
  sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return Endpoint();
  return from_sockaddr(reinterpret_cast<sockaddr*>(&ss));
}

short wait_fd(int fd, short events, const Deadline& deadline, int cancel_fd, const std::string& what) {
  for (;;) {
    pollfd fds[2] = {{fd, events, 0}, {cancel_fd, POLLIN, 0}};
    int rc = poll(fds, cancel_fd >= 0 ? 2 : 1, deadline.poll_timeout_ms());
    if (rc < 0) {
      if (errno == EINTR) continue;
      throw_system_error("poll", errno);
    }
    if (cancel_fd >= 0 && (fds[1].revents & (POLLIN | POLLERR | POLLHUP))) return 0;
    if (fds[0].revents != 0) return fds[0].revents;
    if (deadline.expired()) {
      throw_error(NPG_TIMEOUT, "timed out after " + std::to_string(deadline.budget_ms()) + " ms " + what);
    }
  }
}

UniqueFd connect_with_retry(const Endpoint& to, const Deadline& deadline, const std::string& peer) {
  int backoff_ms = 5;
  int64_t patience_ms = kFirstConnectPatienceMs;
  for (;;) {
    UniqueFd fd(socket(to.family == AF_INET6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) throw_system_error("socket", errno);
    sockaddr_storage ss;
    socklen_t len = to_sockaddr(to, &ss);
    int err = 0;
    if (connect(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        const Deadline attempt = deadline.earlier(patience_ms);
        patience_ms = std::min(patience_ms * 2, kMaxConnectPatienceMs);
        try {
          wait_fd(fd.get(), POLLOUT, attempt, -1, "connecting to " + peer + " at " + to.to_string());
          socklen_t elen = sizeof(err);
          if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &elen) != 0) err = errno;
        } catch (const Error& e) {
          if (e.code() != NPG_TIMEOUT) throw;
          err = ETIMEDOUT;
        }
      }
    }
    if (err == 0) {
      set_nodelay(fd.get());
      return fd;
    }
    bool retry = err == ECONNREFUSED || err == ETIMEDOUT || err == ECONNRESET || err == EHOSTUNREACH ||
                 err == ENETUNREACH || err == EAGAIN;
    if (!retry) throw_system_error("connect to " + peer + " at " + to.to_string(), err);
    if (deadline.expired()) {
      throw_error(NPG_TIMEOUT, "timed out after " + std::to_string(deadline.budget_ms()) + " ms connecting to " + peer +
                                   " at " + to.to_string() + ": " + errno_text(err));
    }
    // Unanswered: a new SYN now rather than the kernel's retransmission later.
    if (err == ETIMEDOUT) continue;
    int64_t sleep_ms = std::min<int64_t>(backoff_ms, deadline.remaining_ms());
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    backoff_ms = std::min(backoff_ms * 2, 200);
  }
}

UniqueFd accept_one(int listen_fd, const Deadline& deadline, int cancel_fd, const std::string& what) {
  for (;;) {
    UniqueFd fd(accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (fd) {
      set_nodelay(fd.get());
      return fd;
    }
    int err = errno;
    if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
    if (!would_block(err)) throw_system_error("accept", err);
    if (wait_fd(listen_fd, POLLIN, deadline, cancel_fd, what) == 0) return UniqueFd();
  }
}

void send_all(int fd, const void* data, size_t len, const Deadline& deadline, int cancel_fd, const std::string& peer) {
  auto* p = static_cast<const uint8_t*>(data);
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    int err = errno;
    if (n < 0 && err == EINTR) continue;
    if (n < 0 && would_block(err)) {
      if (wait_fd(fd, POLLOUT, deadline, cancel_fd, "sending to " + peer) == 0) {
        throw_error(NPG_ABORTED, "communicator was aborted");
      }
      continue;
    }
    if (n < 0 && is_connection_loss(err))
      throw_error(NPG_REMOTE_ERROR, "connection to " + peer + " lost: " + errno_text(err));
    throw_system_error("send to " + peer, err);
  }
}

void recv_all(int fd, void* data, size_t len, const Deadline& deadline, int cancel_fd, const std::string& peer) {
  auto* p = static_cast<uint8_t*>(data);
  while (len > 0) {
    ssize_t n = recv(fd, p, len, 0);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) throw_error(NPG_REMOTE_ERROR, peer + " closed the connection");
    int err = errno;
    if (err == EINTR) continue;
    if (would_block(err)) {
      if (wait_fd(fd, POLLIN, deadline, cancel_fd, "receiving from " + peer) == 0) {
        throw_error(NPG_ABORTED, "communicator was aborted");
      }
      continue;
    }
    if (is_connection_loss(err)) throw_error(NPG_REMOTE_ERROR, "connection to " + peer + " lost: " + errno_text(err));
    throw_system_error("recv from " + peer, err);
  }
}

bool constant_time_equal(const uint8_t* a, const uint8_t* b, size_t len) {
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < len; ++i) diff = diff | static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

void fill_random(void* data, size_t len) {
  auto* p = static_cast<uint8_t*>(data);
  while (len > 0) {
    ssize_t n = getrandom(p, len, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_system_error("getrandom", errno);
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
}

}  // namespace host
}  // namespace npg
