#include "tcp_log_n.h"

#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>

#include "../core/error.h"
#include "handshake.h"
#include "tcp_frames.h"
#include "wire.h"

namespace npg {
namespace host {
namespace {

constexpr size_t kLinkAuthBytes = 8;  // the connecting rank, the link (0 ring, 1 + step)

// The ring (link 0: to rank+1, from rank-1) and log-N step k (link 1+k: to rank-2^k, from
// rank+2^k). Every rank makes its links in the same order and admits early arrivals for
// later links, so a rank waiting for link i only waits for ranks that are making link i.
struct Links {
  std::vector<UniqueFd> to;
  std::vector<UniqueFd> from;
  bool interrupted = false;
};

Links connect_links(int32_t rank, int32_t size, int32_t links, int listener, const std::vector<Endpoint>& endpoints,
                    const HostRootInfo& info, const Deadline& deadline, int cancel_fd) {
  auto target = [&](int32_t link) { return link == 0 ? (rank + 1) % size : TcpBruck::send_peer(rank, size, link - 1); };
  auto source = [&](int32_t link) {
    return link == 0 ? (rank + size - 1) % size : TcpBruck::recv_peer(rank, size, link - 1);
  };
  auto link_name = [](int32_t link) {
    return link == 0 ? std::string("the ring") : "log-N step " + std::to_string(link - 1);
  };
  Links out;
  out.to.resize(links);
  out.from.resize(links);
  Admission admission(listener, info, HandshakePurpose::kRing, kLinkAuthBytes, rank_name(rank));
  for (int32_t link = 0; link < links; ++link) {
    const int32_t to = target(link);
    ByteWriter payload;
    payload.i32(rank);
    payload.i32(link);
    const Endpoint& at = endpoints[to];
    ClientHandshake client(connect_with_retry(at, deadline, rank_name(to) + "'s endpoint for " + link_name(link)), at,
                           info, HandshakePurpose::kRing, payload.data(), rank_name(to));
    while (!out.from[link]) {
      AdmittedConnection c = admission.next(
          deadline, cancel_fd, &client,
          "waiting for " + rank_name(source(link)) + " to connect for " + link_name(link) + admission.drop_summary());
      if (!c.fd) {
        out.interrupted = true;
        return out;
      }
      try {
        ByteReader r(c.payload);
        const int32_t sender = r.i32();
        const int32_t claimed = r.i32();
        r.expect_end();
        if (claimed >= 0 && claimed < links && sender == source(claimed) && !out.from[claimed]) {
          out.from[claimed] = std::move(c.fd);
          continue;
        }
        admission.reject(c, "sender claims rank " + std::to_string(sender) + " for link " + std::to_string(claimed));
      } catch (const Error& e) {
        admission.reject(c, e.what());
      }
    }
    if (!client.finish(deadline, cancel_fd)) {
      out.interrupted = true;
      return out;
    }
    out.to[link] = client.take_fd();
  }
  return out;
}

}  // namespace

TcpBruck::TcpBruck(int32_t rank, int32_t size, std::vector<UniqueFd> to, std::vector<UniqueFd> from, AbortSignal& abort)
    : rank_(rank), size_(size), to_(std::move(to)), from_(std::move(from)), readers_(from_.size()), abort_(abort) {}

int32_t TcpBruck::steps(int32_t size) {
  int32_t k = 0;
  while ((int64_t{1} << k) < size) ++k;
  return k;
}

int32_t TcpBruck::send_peer(int32_t rank, int32_t size, int32_t step) {
  return static_cast<int32_t>((rank - (int64_t{1} << step) % size + size) % size);
}

int32_t TcpBruck::recv_peer(int32_t rank, int32_t size, int32_t step) {
  return static_cast<int32_t>((rank + (int64_t{1} << step)) % size);
}

void TcpBruck::exchange(const GatherArgs& args, bool with_data, std::vector<uint8_t>& headers,
                        const Deadline& deadline) {
  failed_on_close_ = false;
  headers.assign(static_cast<size_t>(size_) * kHeaderBytes, 0);
  BlockHeader{kHeaderMagic, rank_, args.seq, args.send_bytes, args.digest, with_data ? args.send_bytes : 0}.encode(
      headers.data() + static_cast<size_t>(rank_) * kHeaderBytes);
  for (int32_t step = 0; step < steps(size_); ++step) run_step(args, step, headers, deadline);
}

void TcpBruck::run_step(const GatherArgs& args, int32_t step, std::vector<uint8_t>& headers, const Deadline& deadline) {
  const int32_t dist = 1 << step;
  const int32_t blocks = std::min(dist, size_ - dist);
  const int32_t to_rank = send_peer(rank_, size_, step);
  const int32_t from_rank = recv_peer(rank_, size_, step);
  const int to = to_[step].get();
  const int from = from_[step].get();
  LinkReader& reader = readers_[static_cast<size_t>(step)];
  auto header_of = [&](int32_t r) { return headers.data() + static_cast<size_t>(r) * kHeaderBytes; };

  // Send: blocks rank, rank+1, ..., rank+blocks-1, each its header then its bytes.
  SendStream send;
  for (int32_t i = 0; i < blocks; ++i) {
    const int32_t b = (rank_ + i) % size_;
    send.add(header_of(b), kHeaderBytes);
    const uint64_t following = BlockHeader::decode(header_of(b)).following;
    if (following == 0) continue;
    if (b == rank_) {
      for (size_t s = 0; s < args.segment_count; ++s) {
        send.add(static_cast<const uint8_t*>(args.segments[s].address), args.segments[s].bytes);
      }
    } else {
      send.add(args.recv + args.displs[b], following);
    }
  }

  // Receive: blocks rank+dist, ..., rank+dist+blocks-1 from rank+dist, in that order.
  int32_t got_blocks = 0;
  bool in_header = true;
  uint64_t got = 0, following = 0;
  uint8_t* dst = nullptr;  // null: bytes this rank does not expect, dropped
  uint8_t incoming[kHeaderBytes];
  auto take_header = [&]() {
    const int32_t b = (rank_ + dist + got_blocks) % size_;
    BlockHeader h = BlockHeader::decode(incoming);
    if (h.magic == kSignalMagic) {
      got = 0;  // a signal in place of a header (tcp_frames.h); the header is still to come
      const int signal = static_cast<int>(h.bytes & 0xff);
      if ((signal & kUrgentClosed) != kUrgentClosed) return;  // not meant for these links
      // A peer closed its communicator, or failed because one did: name that rank, and pass it
      // on over every link that is between blocks (all but this step's, unless it is sent).
      failed_on_close_ = true;
      closed_culprit_ = urgent_culprit(signal, from_rank, size_);
      const uint8_t relay = urgent_notice(kUrgentClosed, rank_, closed_culprit_, size_);
      for (int32_t i = 0; i < static_cast<int32_t>(to_.size()); ++i) {
        if (to_[i] && (i != step || send.done())) send_signal_frame(to_[i].get(), rank_, args.seq, relay);
      }
      throw_error(NPG_REMOTE_ERROR,
                  (closed_culprit_ < 0 ? std::string("a rank farther away") : rank_name(closed_culprit_)) +
                      " closed its communicator" +
                      (closed_culprit_ == from_rank ? std::string() : " (" + rank_name(from_rank) + " passed it on)"));
    }
    if (h.magic != kHeaderMagic || h.rank != b || h.seq != args.seq) {
      throw_error(NPG_REMOTE_ERROR, rank_name(from_rank) + " sent a malformed header for rank " + std::to_string(b) +
                                        " in log-N step " + std::to_string(step) + " (sequence " +
                                        std::to_string(h.seq) + ", expected " + std::to_string(args.seq) + ")");
    }
    memcpy(header_of(b), incoming, kHeaderBytes);
    following = h.following;
    const bool fits = following == args.counts[b];
    if (!fits) BlockHeader::set_following(header_of(b), 0);
    dst = fits ? args.recv + args.displs[b] : nullptr;
    got = 0;
    in_header = following == 0;
    if (in_header) ++got_blocks;
  };

  LinkWaiter waiter(poll_spin_, deadline, abort_);
  while (!send.done() || got_blocks < blocks) {
    pollfd fds[3];
    nfds_t n = 0;
    int to_i = -1, from_i = -1;
    if (!send.done()) {
      to_i = static_cast<int>(n);
      fds[n++] = {to, POLLOUT, 0};
    }
    if (got_blocks < blocks) {
      from_i = static_cast<int>(n);
      fds[n++] = {from, POLLIN, 0};
    }
    fds[n++] = {abort_.fd(), POLLIN, 0};
    if (from_i >= 0 && reader.buffered()) {
      fds[from_i].revents = POLLIN;  // bytes already read go first: the socket may hold no more
    } else if (!waiter.wait(fds, n)) {
      if (deadline.expired()) {
        throw_error(NPG_TIMEOUT, "timed out after " + std::to_string(deadline.budget_ms()) + " ms in log-N step " +
                                     std::to_string(step) + ": sent " + std::to_string(send.sent()) + "/" +
                                     std::to_string(send.total()) + " bytes to " + rank_name(to_rank) + ", received " +
                                     std::to_string(got_blocks) + "/" + std::to_string(blocks) + " blocks from " +
                                     rank_name(from_rank));
      }
      continue;
    }
    // A step's headers and blocks leave in as few sendmsg calls as the socket takes.
    const uint64_t sent_before = send.sent();
    bool read_some = false;
    if (to_i >= 0 && fds[to_i].revents != 0) send.send_ready(to, to_rank, UINT64_MAX);
    if (from_i >= 0 && fds[from_i].revents != 0) {
      while (got_blocks < blocks) {
        const iovec span = receive_span(in_header, incoming, dst, following, got, scratch_);
        const int64_t k = reader.read(from, static_cast<uint8_t*>(span.iov_base), span.iov_len, from_rank);
        if (k < 0) throw_error(NPG_REMOTE_ERROR, rank_name(from_rank) + " closed its connection");
        if (k == 0) break;
        read_some = true;
        got += static_cast<uint64_t>(k);
        if (in_header) {
          if (got == kHeaderBytes) take_header();
        } else if (got == following) {
          in_header = true;
          got = 0;
          ++got_blocks;
        }
      }
    }
    waiter.stepped(read_some || send.sent() != sent_before);
  }
}

void TcpBruck::send_signal_all(uint8_t signal) noexcept {
  for (UniqueFd& fd : to_) {
    if (fd) send_signal_frame(fd.get(), rank_, 0, signal);
  }
}

void TcpBruck::shutdown_links() noexcept {
  for (auto* links : {&to_, &from_}) {
    for (UniqueFd& fd : *links) {
      if (fd) shutdown(fd.get(), SHUT_RDWR);
    }
  }
}

int TcpBruck::close() noexcept {
  int first = 0;
  for (auto* links : {&to_, &from_}) {
    for (UniqueFd& fd : *links) {
      int err = fd.reset();
      if (first == 0) first = err;
    }
  }
  return first;
}

TcpAlgorithm FlatTcp::algorithm(uint32_t flags) {
  if (flags & NPG_FLAG_FORCE_RING) return TcpAlgorithm::kRing;
  if (flags & NPG_FLAG_FORCE_LOG_N) return TcpAlgorithm::kLogN;
  return TcpAlgorithm::kAuto;
}

FlatTcp::FlatTcp(TcpAlgorithm algorithm, int32_t size, std::unique_ptr<TcpRing> ring, std::unique_ptr<TcpBruck> bruck)
    : algorithm_(algorithm), size_(size), ring_(std::move(ring)), bruck_(std::move(bruck)) {}

std::unique_ptr<FlatTcp> FlatTcp::connect(int32_t rank, int32_t size, uint32_t flags, int listener,
                                          const std::vector<Endpoint>& endpoints, const HostRootInfo& info,
                                          const Deadline& deadline, int cancel_fd, AbortSignal& abort) {
  const TcpAlgorithm algo = algorithm(flags);
  const bool log_n = algo == TcpAlgorithm::kLogN || (algo == TcpAlgorithm::kAuto && size >= kMinLogNRanks);
  if (!log_n) {
    std::unique_ptr<TcpRing> ring =
        TcpRing::connect(rank, size, listener, endpoints[(rank + 1) % size], info, deadline, cancel_fd, abort);
    if (!ring) return nullptr;
    return std::unique_ptr<FlatTcp>(new FlatTcp(algo, size, std::move(ring), nullptr));
  }
  Links links = connect_links(rank, size, 1 + TcpBruck::steps(size), listener, endpoints, info, deadline, cancel_fd);
  if (links.interrupted) return nullptr;
  std::unique_ptr<TcpRing> ring = TcpRing::adopt(rank, size, std::move(links.from[0]), std::move(links.to[0]), abort);
  std::vector<UniqueFd> to(std::make_move_iterator(links.to.begin() + 1), std::make_move_iterator(links.to.end()));
  std::vector<UniqueFd> from(std::make_move_iterator(links.from.begin() + 1),
                             std::make_move_iterator(links.from.end()));
  std::unique_ptr<TcpBruck> bruck(new TcpBruck(rank, size, std::move(to), std::move(from), abort));
  return std::unique_ptr<FlatTcp>(new FlatTcp(algo, size, std::move(ring), std::move(bruck)));
}

void FlatTcp::set_poll_spin(LinkSpin spin) {
  ring_->set_poll_spin(spin);
  if (bruck_) bruck_->set_poll_spin(spin);
}

void FlatTcp::all_gather_v(const GatherArgs& args, const Deadline& deadline) {
  if (!bruck_) {
    ring_->all_gather_v(args, deadline);
    return;
  }
  try {
    run_with_links(args, deadline);
  } catch (const Error&) {
    // A rank that closed its communicator: the ranks waiting on this one's other links (in
    // an earlier collective's ring, or in log-N steps) learn whom to name too.
    if (ring_->failed_on_close()) {
      bruck_->send_signal_all(urgent_notice(kUrgentClosed, ring_->rank(), ring_->closed_culprit(), size_));
    } else if (bruck_->failed_on_close()) {
      send_signal_frame(ring_->right_fd(), ring_->rank(), 0,
                        urgent_notice(kUrgentClosed, ring_->rank(), bruck_->closed_culprit(), size_));
    }
    throw;
  }
}

void FlatTcp::run_with_links(const GatherArgs& args, const Deadline& deadline) {
  // With the log-N links every collective starts with the log-N steps, so that ranks that
  // disagree on the sizes (and so on the algorithm) still meet and reach one verdict;
  // large outputs send only headers there and their bytes round the ring.
  const bool small = algorithm_ == TcpAlgorithm::kLogN || args.total_bytes(size_) <= kLogNMaxBytes;
  std::vector<uint8_t> headers;
  bruck_->exchange(args, small, headers, deadline);
  judge_layout(headers.data(), args, size_);
  if (small) {
    args.write_own_block();
    return;
  }
  ring_->all_gather_v(args, deadline);
}

void FlatTcp::on_abort() noexcept {
  ring_->on_abort();
  if (bruck_) bruck_->shutdown_links();
}

void FlatTcp::on_failure() noexcept {
  ring_->on_failure();
  if (bruck_) bruck_->shutdown_links();
}

void FlatTcp::on_leave() noexcept {
  ring_->on_leave();
  if (bruck_) bruck_->send_signal_all(kUrgentClosed);  // every collective has ended: between blocks
}

void FlatTcp::close() {
  int err = bruck_ ? bruck_->close() : 0;
  try {
    ring_->close();
  } catch (...) {
    if (bruck_) bruck_.reset();
    throw;
  }
  if (err != 0) throw_system_error("closing log-N sockets", err);
}

}  // namespace host
}  // namespace npg
