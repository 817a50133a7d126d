#include "tcp_ring.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/sysinfo.h>

#include <algorithm>
#include <array>
#include <list>

#include "../core/error.h"
#include "handshake.h"
#include "tcp_frames.h"
#include "wire.h"

namespace npg {
namespace host {
namespace {

constexpr size_t kRingAuthBytes = 4;  // the connecting rank
constexpr size_t kHeaderBytes = BlockHeader::kBytes;
// A rank whose own probe has gone unanswered this long blames its left neighbour when it is
// probed in turn: a live rank in the collective answers within a poll round.
constexpr auto kProbeAnswerLimit = std::chrono::milliseconds(200);

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
  using Clock = std::chrono::steady_clock;
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

  // A stalled ring. A rank waiting for a unit from its left neighbour cannot tell whether the
  // neighbour stalled or waits itself (for a block it only passes on, or in an earlier
  // collective). After a quarter of the budget without progress it asks (a probe on the
  // reverse direction of the link), and the neighbour answers whom it blames; a rank that
  // gives up tells its right neighbour whom it blames, and that one gives up at once and
  // passes it on. So every rank names the rank that stalled, and none the ring connection a
  // neighbour closed after giving up.
  const auto probe_after = std::chrono::milliseconds(std::max<int64_t>(1, deadline.budget_ms() / 4));
  auto last_progress = Clock::now();
  int32_t probed_unit = 0;  // the unit the probe asked about, 0 when none is out
  Clock::time_point probed_at;
  int answer = -1;  // the left's answer to it, -1 while none came
  failed_on_close_ = false;
  std::list<std::array<uint8_t, kHeaderBytes>> signal_frames;  // queued in the send stream

  auto block_of = [&](int32_t u) { return (rank_ - u + size_) % size_; };
  auto waiting_for = [&]() {
    if (unit >= size_) return std::string("had every block");
    const int32_t block = block_of(unit);
    return "still waited for " + rank_name(block) + "'s block" +
           (block == left_rank ? std::string() : " (it comes through " + rank_name(left_rank) + ")");
  };
  // A signal to the right neighbour: in band where a unit would start (a frame in place of a
  // header), else, in the middle of a unit this rank forwards, an urgent byte: the neighbour
  // then waits in the middle of that unit, in poll, which reports the byte before a read could
  // pass it (a read past it drops it).
  auto signal_right = [&](uint8_t signal) {
    if (!in_header && forward_piece != 0) {
      send_urgent(right_.get(), signal);
      return;
    }
    signal_frames.emplace_back();
    uint8_t* frame = signal_frames.back().data();
    BlockHeader{kSignalMagic, rank_, args.seq, signal, 0, 0}.encode(frame);
    if (send.done()) {
      // Sent at once, without a poll round; a frame that went out in part must go out whole
      // (the stream stays in step), and one that found the link full or lost is dropped.
      const ssize_t k = ::send(right_.get(), frame, kHeaderBytes, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (k > 0 && static_cast<size_t>(k) < kHeaderBytes) send.add(frame + k, kHeaderBytes - static_cast<size_t>(k));
      return;
    }
    send.add(frame, kHeaderBytes);
    try {
      send.send_ready(right_.get(), right_rank, UINT64_MAX);
    } catch (const Error&) {
      // the neighbour is gone; this rank's own failure says what it knows
    }
  };
  // Probes the left neighbour about the unit this rank waits for.
  auto probe_left = [&]() {
    ByteWriter probe;
    probe.u32(kProbeMagic);
    probe.u32(static_cast<uint32_t>(unit));
    probe.u64(args.seq);
    ssize_t k = ::send(left_.get(), probe.data().data(), kProbeBytes, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)k;  // unanswered, it blames the left, which is what a lost link means too
    probed_unit = unit;
    probed_at = Clock::now();
    answer = -1;
  };
  // Passes on, upstream, that `culprit` closed its communicator.
  auto tell_left_closed = [&](int32_t culprit) {
    failed_on_close_ = true;
    closed_culprit_ = culprit;
    ByteWriter frame;
    frame.u32(kClosedMagic);
    frame.u32(urgent_notice(kUrgentClosed, rank_, culprit, size_));
    frame.u64(args.seq);
    ssize_t k = ::send(left_.get(), frame.data().data(), kProbeBytes, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)k;  // a lost link: the left neighbour has gone too
  };
  // Answers the right neighbour's probe, once this rank knows whom it blames: how far before it
  // that rank lies (1: its left, which did not answer; 1 + the left's answer when the left waits
  // too), 0 when it lacks nothing (what is missing is on its way). Until then it asks its own
  // left, and says at once that it waits too, so that its silence means a stalled rank.
  auto answer_if_known = [&]() {
    if (!answer_owed_) return;
    int blame = 0;
    if (unit < size_) {
      if (probed_unit != unit) probe_left();
      const bool silent = answer < 0 && Clock::now() - probed_at >= kProbeAnswerLimit;
      if (answer > 0 && answer < kAnswerWaitsToo) {
        blame = 1 + answer;
      } else if (answer == 0 || silent) {
        blame = 1;
      } else if (answer == kAnswerUnknown) {
        blame = kAnswerUnknown;
      } else {
        if (!waits_too_said_) signal_right(kAnswerWaitsToo);
        waits_too_said_ = true;
        return;
      }
    }
    answer_owed_ = false;
    waits_too_said_ = false;
    signal_right(static_cast<uint8_t>(std::min(blame, static_cast<int>(kAnswerUnknown))));
  };
  // A signal from the left: an answer to the probe, or why the left gave up; then this rank
  // gives up too, naming the same rank, and tells its right neighbour.
  auto take_signal = [&](int signal) {
    if (signal < 0) return;
    if (signal < kUrgentTimedOut) {
      if (probed_unit == unit) {
        answer = signal;
        answer_if_known();
      }
      return;
    }
    const uint8_t kind = static_cast<uint8_t>(signal) & kUrgentClosed;
    const int32_t culprit = urgent_culprit(signal, left_rank, size_);
    signal_right(urgent_notice(kind, rank_, culprit, size_));
    const std::string who = culprit < 0        ? std::string("a rank farther up the ring")
                            : culprit == rank_ ? std::string("this rank")
                                               : rank_name(culprit);
    if (kind == kUrgentClosed) {
      // The left neighbour may wait for this rank's block in a later collective.
      tell_left_closed(culprit);
      throw_error(NPG_REMOTE_ERROR,
                  who + " closed its communicator" +
                      (culprit == left_rank ? std::string() : " (" + rank_name(left_rank) + " passed it on)"));
    }
    throw_error(NPG_TIMEOUT, rank_name(left_rank) + " timed out waiting for " + who + "; this rank " + waiting_for());
  };
  // The right neighbour closed its communicator, or failed because a rank did (it said so on
  // the reverse direction of the link): when this rank still has to send to it, it fails too,
  // and tells the others (the right neighbour may only pass it on).
  auto fail_if_right_closed = [&]() {
    if (!right_closed_ || send.done()) return;
    const int32_t culprit = right_closed_culprit_;
    signal_right(urgent_notice(kUrgentClosed, rank_, culprit, size_));
    tell_left_closed(culprit);
    throw_error(NPG_REMOTE_ERROR,
                (culprit < 0 ? std::string("a rank farther down the ring") : rank_name(culprit)) +
                    " closed its communicator" +
                    (culprit == right_rank ? std::string() : " (" + rank_name(right_rank) + " passed it on)"));
  };
  // Takes the right neighbour's probes about this collective or a later one (this rank may lag
  // behind) off the reverse direction of the link.
  auto take_probes = [&]() {
    while (reverse_open_) {
      const ssize_t k = recv(right_.get(), probe_ + probe_bytes_, kProbeBytes - probe_bytes_, MSG_DONTWAIT);
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
      if (k <= 0) {
        reverse_open_ = false;  // the right neighbour is gone; sending to it says so
        break;
      }
      probe_bytes_ += static_cast<size_t>(k);
      if (probe_bytes_ < kProbeBytes) continue;
      probe_bytes_ = 0;
      ByteReader r(probe_, kProbeBytes);
      const uint32_t magic = r.u32();
      const uint32_t value = r.u32();
      const uint64_t seq = r.u64();
      if (magic == kClosedMagic) {
        right_closed_ = true;
        right_closed_culprit_ = urgent_culprit(static_cast<int>(value & 0xff), right_rank, size_);
        continue;
      }
      if (magic != kProbeMagic) {
        reverse_open_ = false;
        break;
      }
      if (seq >= args.seq) answer_owed_ = true;  // else about a collective this rank has finished
    }
    fail_if_right_closed();
    answer_if_known();
  };
  // Sends what is ready to the right; a lost link to a right neighbour that closed its
  // communicator is that.
  auto send_right = [&](uint64_t budget) {
    try {
      send.send_ready(right_.get(), right_rank, budget);
    } catch (const Error&) {
      take_probes();
      throw;
    }
  };
  // The deadline passed: names the rank that stalled, tells the right neighbour, throws.
  auto give_up = [&]() {
    take_signal(recv_urgent(left_.get()));  // the left gave up first, or answered late
    const auto silent_ms = [&]() {
      return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - probed_at).count());
    };
    const bool answered = probed_unit == unit && answer > 0 && answer < kAnswerWaitsToo;
    const bool unanswered = probed_unit == unit && answer < 0;
    std::string missing;
    int32_t culprit = right_rank;  // every block is in: the right neighbour does not take the rest
    if (unit < size_) {
      const int32_t block = block_of(unit);
      const int32_t blamed = answered ? (left_rank - answer % size_ + size_) % size_ : -1;
      missing = "; still waiting for " + rank_name(block) + "'s block";
      culprit = block;
      if (block == left_rank) {
        if (answered) {
          culprit = blamed;
          missing += " (" + rank_name(left_rank) + " waits for " + rank_name(blamed) + ")";
        } else if (probed_unit == unit && answer == kAnswerWaitsToo) {
          culprit = -1;  // farther up the ring than this rank has learnt
          missing += " (" + rank_name(left_rank) + " waits too, for a rank before it)";
        } else if (unanswered) {
          missing += ": " + rank_name(left_rank) + " did not answer for " + silent_ms() +
                     " ms (stopped, or not in this collective)";
        }
      } else {
        const std::string through = " (it comes through " + rank_name(left_rank);
        if (unanswered) {
          culprit = left_rank;
          missing += ", which " + rank_name(left_rank) + " has not passed on: " + rank_name(left_rank) +
                     " did not answer for " + silent_ms() + " ms (stopped, or not in this collective)";
        } else if (answered) {
          culprit = blamed;
          missing += blamed == block ? through + ", which waits for it too)"
                                     : ", which " + rank_name(blamed) + " has not passed on" + through + ")";
        } else {
          missing += through + ")";
        }
      }
    } else {
      missing = "; " + rank_name(right_rank) + " has not taken the rest";
    }
    signal_right(urgent_notice(kUrgentTimedOut, rank_, culprit, size_));
    throw_error(NPG_TIMEOUT, "timed out after " + std::to_string(deadline.budget_ms()) +
                                 " ms in the ring data exchange: sent " + std::to_string(send.sent()) + "/" +
                                 std::to_string(send.total()) + " bytes to " + rank_name(right_rank) + ", received " +
                                 std::to_string(unit - 1) + "/" + std::to_string(size_ - 1) + " blocks from " +
                                 rank_name(left_rank) + missing);
  };

  // A unit's header arrived: check it, decide where its bytes go, queue its forward. False when
  // it was a signal: the unit's header is still to come.
  auto take_header = [&]() {
    const int32_t block = block_of(unit);
    BlockHeader h = BlockHeader::decode(incoming);
    if (h.magic == kSignalMagic) {
      take_signal(static_cast<int>(h.bytes & 0xff));
      got = 0;
      return false;
    }
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
    return true;
  };

  fail_if_right_closed();  // learnt in an earlier collective, which did not need it any more
  LinkWaiter waiter(poll_spin_, deadline, abort_);
  while (!send.done() || unit < size_) {
    if (probed_unit != 0 && probed_unit != unit) {
      probed_unit = 0;  // the probe asked about a unit that has come since
      answer = -1;
    }
    const bool waits_left = unit < size_;
    const auto probe_at = last_progress + probe_after;
    auto wake = Clock::time_point::max();
    if (waits_left && probed_unit == 0) wake = probe_at;
    if (waits_left && probed_unit != 0 && answer < 0 && answer_owed_) wake = probed_at + kProbeAnswerLimit;
    if (!waits_left && answer_owed_) answer_if_known();  // every block is in: on its way
    waiter.wake_by(wake);
    const bool can_send = send.can_send();
    pollfd fds[5];
    nfds_t n = 0;
    int right_i = -1, left_i = -1, urgent_i = -1, reverse_i = -1;
    if (can_send) {
      right_i = static_cast<int>(n);
      fds[n++] = {right_.get(), POLLOUT, 0};
    }
    if (waits_left) {
      left_i = static_cast<int>(n);
      fds[n++] = {left_.get(), POLLIN, 0};
    }
    const nfds_t links = n;
    // Side channels, reported by a poll only: the left's urgent byte, the right's probes.
    if (waits_left) {
      urgent_i = static_cast<int>(n);
      fds[n++] = {left_.get(), POLLPRI, 0};
    }
    if (reverse_open_) {
      reverse_i = static_cast<int>(n);
      fds[n++] = {right_.get(), POLLIN, 0};
    }
    fds[n++] = {abort_.fd(), POLLIN, 0};
    if (left_i >= 0 && from_left_.buffered()) {
      fds[left_i].revents = POLLIN;  // bytes already read go first: the socket may hold no more
    } else if (!waiter.wait(fds, n, links)) {
      if (waits_left && probed_unit == 0 && Clock::now() >= probe_at) probe_left();
      answer_if_known();
      if (deadline.expired()) give_up();
      continue;
    }
    if (urgent_i >= 0 && (fds[urgent_i].revents & POLLPRI) != 0) take_signal(recv_urgent(left_.get()));
    if (reverse_i >= 0 && fds[reverse_i].revents != 0) take_probes();
    const uint64_t sent_before = send.sent();
    bool read_some = false;
    if (right_i >= 0 && fds[right_i].revents != 0) send_right(4 * kIoChunkBytes);
    if (left_i >= 0 && fds[left_i].revents != 0) {
      uint64_t budget = 4 * kIoChunkBytes;
      while (budget > 0 && unit < size_) {
        // A unit whose header and bytes fit the reader's buffer comes in one read through it;
        // a larger one's bytes go straight to where this rank expects them, with the header in
        // one call (saving the buffer's copy), and back to the reader if the header disagrees.
        const int32_t block = block_of(unit);
        uint8_t* guess = nullptr;
        int64_t k = 0;
        try {
          if (in_header && got == 0 && !from_left_.buffered() &&
              args.counts[block] + kHeaderBytes > LinkReader::kBufferBytes) {
            guess = args.recv + args.displs[block];
            k = from_left_.read_header_and_body(left_.get(), incoming, guess,
                                                std::min(args.counts[block], kIoChunkBytes), left_rank);
          } else {
            const iovec span = receive_span(in_header, incoming, dst, following, got, scratch);
            k = from_left_.read(left_.get(), static_cast<uint8_t*>(span.iov_base), span.iov_len, left_rank);
          }
        } catch (const Error&) {
          take_signal(recv_urgent(left_.get()));  // why the left went away, when it said so
          throw;
        }
        if (k < 0) {
          take_signal(recv_urgent(left_.get()));
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
          const uint64_t body = static_cast<uint64_t>(k) - kHeaderBytes;
          if (!take_header() || dst != guess) {
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
    const bool moved = read_some || send.sent() != sent_before;
    if (moved) last_progress = Clock::now();
    waiter.stepped(moved);
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

void TcpRing::on_leave() noexcept {
  // Its last collective is over, so the link to the right is between units; the left
  // neighbour reads the reverse direction of its link.
  if (right_) send_signal_frame(right_.get(), rank_, 0, kUrgentClosed);  // else the neighbour sees the EOF
  if (left_) {
    ByteWriter frame;
    frame.u32(kClosedMagic);
    frame.u32(kUrgentClosed);
    frame.u64(0);
    ssize_t k = ::send(left_.get(), frame.data().data(), kProbeBytes, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)k;
  }
}

void TcpRing::close() {
  int err = left_.reset();
  int err2 = right_.reset();
  if (err == 0) err = err2;
  if (err != 0) throw_system_error("closing ring sockets", err);
}

}  // namespace host
}  // namespace npg
