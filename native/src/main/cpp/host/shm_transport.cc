#include "shm_transport.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <new>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "../core/block_copy.h"
#include "../core/error.h"

namespace npg {
namespace host {

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared atomics must be lock-free");

namespace {

constexpr uint64_t kSegmentMagic = 0x33474d48534750ull;  // "PGSHMG3"
constexpr size_t kLineBytes = 128;
constexpr uint64_t kStatusOk = 0;
constexpr uint64_t kStatusFailed = 1;
constexpr uint64_t kStatusAborted = 2;
constexpr uint64_t kStatusTimedOut = 3;  // blame holds the rank it waited for
// Closed its communicator (npg_comm_destroy) outside a failure. Not a failure by itself: a rank
// destroys only after its last collective returned, so it has published everything a peer
// still waits for in that collective; only a peer that waits for more (a later collective)
// fails.
constexpr uint64_t kStatusLeft = 4;
constexpr auto kDrainLimit = std::chrono::seconds(10);
constexpr uint64_t kCmaChunkBytes = 8ull << 20;  // abort is checked between chunks
constexpr size_t kCmaIovecs = 64;                // remote pieces per process_vm_readv
constexpr auto kLivenessPeriod = std::chrono::milliseconds(10);
// A waiter spins this long: long enough to cover the skew of ranks that each own a CPU,
// short when ranks outnumber CPUs and spinning steals the CPU the awaited rank needs.
constexpr auto kSpinBudget = std::chrono::microseconds(50);
constexpr auto kOversubscribedSpinBudget = std::chrono::microseconds(2);
// Then it yields its CPU until this long has passed, and only then sleeps on the bell. A
// yield hands the CPU at once to an awaited rank that shares it, where a sleep and its
// wake-up cost a round trip through the scheduler; and a waiter that stays awake longer than
// a sleeping peer takes to wake on an idle virtual CPU (measured up to ~500 us) keeps the
// ranks from taking turns to sleep, every collective costing a wake-up
// (docs/performance/2026-12-shm-waits-and-eager-path.md).
constexpr auto kYieldBudget = std::chrono::microseconds(1000);
constexpr auto kOversubscribedYieldBudget = std::chrono::microseconds(200);
// Longest single sleep on the bell: abort, deadline and peer exits are noticed at least this often.
constexpr long kBellSleepNs = 1000000;
constexpr uint64_t kMaxEagerCapacity = 256ull << 10;
constexpr uint64_t kEagerAreaBytes = 8ull << 20;  // all ranks' eager blocks, both parities

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

std::string rank_list(const std::vector<int32_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 16) out += ", ... (" + std::to_string(ranks.size()) + " ranks)";
  return out;
}

long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex word is a plain 32-bit word");
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

// CPUs of the host, not of this thread's affinity: ranks pinned one per CPU do not oversubscribe.
int online_cpus() { return std::max(1, get_nprocs()); }

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

}  // namespace

struct alignas(kLineBytes) ShmTransport::Header {
  std::atomic<uint64_t> magic;
  std::atomic<uint64_t> rank_size;
  std::atomic<uint64_t> staging_chunk;
  // A shared futex word: ranks that sleep count themselves in sleepers; a rank that
  // completes a phase (or fails) while any sleeps bumps rings and wakes them all.
  std::atomic<uint32_t> rings;
  std::atomic<uint32_t> sleepers;
  // Publishes so far per phase (posted, done, staged, drained): every rank publishes once
  // per phase instance, so the rank whose publish makes the count a multiple of the rank
  // count completes the instance and is the only one that rings.
  std::atomic<uint64_t> arrivals[4];
};

// One rank's slot in the control segment; written by its rank, read by all.
struct alignas(kLineBytes) ShmTransport::Slot {
  std::atomic<uint64_t> posted_seq;
  std::atomic<uint64_t> done_seq;
  std::atomic<uint64_t> status;
  std::atomic<uint64_t> stage_posted;
  std::atomic<uint64_t> stage_done;
  std::atomic<uint64_t> reading;  // seq while copying from peers' send buffers, else 0
  std::atomic<uint64_t> blame;    // 1 + the rank that made this one fail, 0 if none
  // The last collective this rank returned from successfully: a failure of the rank from
  // then on belongs to a later collective (check_peer_status).
  std::atomic<uint64_t> finished_seq;
};
static_assert(sizeof(ShmTransport::Slot) == kLineBytes, "one slot per cache-line pair");

// What a rank publishes for collective seq (before posted_seq = seq), followed in the segment
// by room for its eager block. Each rank has two, used by the parity of seq: a peer reading
// the post of collective n cannot be overtaken, because its owner writes that post again
// only for n+2, which it starts after every peer posted n+1, i.e. finished collective n.
struct alignas(kLineBytes) ShmTransport::Post {
  std::atomic<uint64_t> send_bytes;
  std::atomic<uint64_t> digest;
  std::atomic<uint64_t> eager;          // 1: the block follows this post
  std::atomic<uint64_t> segments_addr;  // else: this rank's npg_segment_t array, in its own memory
  std::atomic<uint64_t> segment_count;
  // The first segments (address, bytes) themselves, so that a peer in another process
  // reads them without a process_vm_readv of the segment array.
  std::atomic<uint64_t> inline_segments[2 * ShmTransport::kInlineSegments];
};
static_assert(sizeof(ShmTransport::Post) == 2 * kLineBytes, "a post takes two cache-line pairs");

namespace {

size_t posts_offset(int32_t size) { return kLineBytes + static_cast<size_t>(size) * sizeof(ShmTransport::Slot); }

size_t post_stride(int32_t size) { return sizeof(ShmTransport::Post) + ShmTransport::eager_capacity(size); }

size_t staging_offset(int32_t size) {
  const size_t control = posts_offset(size) + static_cast<size_t>(size) * 2 * post_stride(size);
  return (control + 4095) & ~size_t(4095);
}

}  // namespace

uint64_t staging_chunk_bytes_from_env() {
  const char* env = getenv("NPUGATHER_STAGING_CHUNK_BYTES");
  if (env == nullptr || env[0] == '\0') return kDefaultStagingChunkBytes;
  char* end = nullptr;
  unsigned long long v = strtoull(env, &end, 10);
  if (end == env || *end != '\0' || v < 64 || v > (1ull << 30)) return kDefaultStagingChunkBytes;
  return (v + 63) & ~63ull;
}

uint64_t eager_bytes_from_env(bool threads, bool oversubscribed) {
  const uint64_t fallback = oversubscribed ? kOversubscribedEagerBytes : threads ? 0 : kEagerBytes;
  const char* env = getenv("NPUGATHER_EAGER_BYTES");
  if (env == nullptr || env[0] == '\0') return fallback;
  char* end = nullptr;
  unsigned long long v = strtoull(env, &end, 10);
  if (end == env || *end != '\0') return fallback;
  return v;
}

uint64_t ShmTransport::eager_capacity(int32_t size) {
  const uint64_t share = kEagerAreaBytes / (2 * static_cast<uint64_t>(std::max(size, 1)));
  return std::min(kMaxEagerCapacity, share & ~uint64_t(63));
}

bool cma_probe(pid_t pid, uint64_t addr, uint64_t value) {
  uint64_t got = 0;
  iovec local{&got, sizeof(got)};
  iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(addr)), sizeof(got)};
  ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
  return n == static_cast<ssize_t>(sizeof(got)) && got == value;
}

size_t ShmTransport::segment_bytes(int32_t size, bool with_staging, uint64_t chunk) {
  size_t bytes = staging_offset(size);
  if (with_staging) bytes += static_cast<size_t>(size) * chunk;
  return bytes;
}

void ShmTransport::format(uint8_t* base, int32_t size, uint64_t chunk) {
  auto* header = new (base) Header();
  for (int32_t r = 0; r < size; ++r) new (base + kLineBytes + r * sizeof(Slot)) Slot();
  for (int32_t i = 0; i < 2 * size; ++i) new (base + posts_offset(size) + i * post_stride(size)) Post();
  header->rank_size.store(static_cast<uint64_t>(size), std::memory_order_relaxed);
  header->staging_chunk.store(chunk, std::memory_order_relaxed);
  header->magic.store(kSegmentMagic, std::memory_order_release);
}

void ShmTransport::check_format(const uint8_t* base, int32_t size, uint64_t chunk) {
  const auto* header = reinterpret_cast<const Header*>(base);
  if (header->magic.load(std::memory_order_acquire) != kSegmentMagic ||
      header->rank_size.load(std::memory_order_relaxed) != static_cast<uint64_t>(size) ||
      header->staging_chunk.load(std::memory_order_relaxed) != chunk) {
    throw_error(NPG_REMOTE_ERROR, "shared control segment has an unexpected header");
  }
}

ShmTransport::ShmTransport(ShmSegment segment, Mode mode, int32_t rank, int32_t size, uint64_t chunk,
                           const std::vector<int32_t>& pids, AbortSignal& abort)
    : segment_(std::move(segment)),
      mode_(mode),
      rank_(rank),
      size_(size),
      chunk_(chunk),
      eager_capacity_(eager_capacity(size)),
      eager_limit_(std::min(eager_bytes_from_env(mode == Mode::kThreads, size > online_cpus()), eager_capacity_)),
      pids_(pids),
      pidfds_(size),
      abort_(abort),
      spin_budget_(size > online_cpus() ? kOversubscribedSpinBudget : kSpinBudget),
      yield_budget_(size > online_cpus() ? kOversubscribedYieldBudget : kYieldBudget) {
  const int32_t self = static_cast<int32_t>(getpid());
  for (int32_t r = 0; r < size_; ++r) {
    if (r == rank_ || pids_[r] == self) continue;
    pidfds_[r] = UniqueFd(open_pidfd(pids_[r]));  // fails softly: kill(pid, 0) is the fallback
  }
}

const char* ShmTransport::name() const {
  switch (mode_) {
    case Mode::kThreads:
      return "threads";
    case Mode::kCma:
      return "cma";
    case Mode::kStaging:
      return "staging";
  }
  return "staging";
}

ShmTransport::Slot& ShmTransport::slot(int32_t r) const {
  return *reinterpret_cast<Slot*>(segment_.data() + kLineBytes + static_cast<size_t>(r) * sizeof(Slot));
}

ShmTransport::Header& ShmTransport::header() const { return *reinterpret_cast<Header*>(segment_.data()); }

ShmTransport::Post& ShmTransport::post(int32_t r, uint64_t seq) const {
  const size_t index = 2 * static_cast<size_t>(r) + (seq & 1);
  return *reinterpret_cast<Post*>(segment_.data() + posts_offset(size_) + index * post_stride(size_));
}

uint8_t* ShmTransport::eager_block(int32_t r, uint64_t seq) const {
  return reinterpret_cast<uint8_t*>(&post(r, seq)) + sizeof(Post);
}

void ShmTransport::publish(std::atomic<uint64_t> Slot::*field, uint64_t value) {
  const int phase = field == &Slot::posted_seq     ? 0
                    : field == &Slot::done_seq     ? 1
                    : field == &Slot::stage_posted ? 2
                                                   : 3;
  // seq_cst on both sides: either a waiter sees the value, or the completing rank sees it sleeping.
  (slot(rank_).*field).store(value, std::memory_order_seq_cst);
  const uint64_t arrived = header().arrivals[phase].fetch_add(1, std::memory_order_seq_cst) + 1;
  if (arrived % static_cast<uint64_t>(size_) == 0) wake_sleepers();
}

void ShmTransport::wake_sleepers() noexcept {
  Header& h = header();
  if (h.sleepers.load(std::memory_order_seq_cst) == 0) return;
  h.rings.fetch_add(1, std::memory_order_seq_cst);
  futex(&h.rings, FUTEX_WAKE, INT_MAX, nullptr);
}

bool ShmTransport::peers_reached(std::atomic<uint64_t> Slot::*field, uint64_t target) const {
  for (int32_t r = 0; r < size_; ++r) {
    if (r != rank_ && (slot(r).*field).load(std::memory_order_acquire) < target) return false;
  }
  return true;
}

void ShmTransport::sleep_on_bell(std::atomic<uint64_t> Slot::*field, uint64_t target) {
  Header& h = header();
  h.sleepers.fetch_add(1, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // the checks below stay after the count
  const uint32_t rings = h.rings.load(std::memory_order_seq_cst);
  if (!peers_reached(field, target) && !abort_.triggered()) {
    timespec timeout{0, kBellSleepNs};
    futex(&h.rings, FUTEX_WAIT, rings, &timeout);  // any wake, timeout or EAGAIN: the caller re-checks
  }
  h.sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

uint8_t* ShmTransport::staging(int32_t r) const {
  return segment_.data() + staging_offset(size_) + static_cast<size_t>(r) * chunk_;
}

void ShmTransport::check_peers_alive(const std::vector<int32_t>& missing) {
  const int32_t self = static_cast<int32_t>(getpid());
  for (int32_t r : missing) {
    if (pids_[r] == self) continue;
    bool exited = false;
    if (pidfds_[r]) {
      pollfd p{pidfds_[r].get(), POLLIN, 0};
      exited = poll(&p, 1, 0) > 0;
    } else {
      exited = kill(pids_[r], 0) != 0 && errno == ESRCH;
    }
    if (exited) {
      slot(rank_).blame.store(static_cast<uint64_t>(r) + 1, std::memory_order_relaxed);
      throw_error(NPG_REMOTE_ERROR, "rank " + std::to_string(r) + " exited (pid " + std::to_string(pids_[r]) + ")");
    }
  }
}

void ShmTransport::check_peer_status(std::atomic<uint64_t> Slot::*field, uint64_t target) {
  for (int32_t r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    uint64_t st = slot(r).status.load(std::memory_order_seq_cst);
    if (st == kStatusOk) continue;
    // A rank that has finished this collective published all of it before: what became of
    // it since (it failed, aborted or timed out in a later collective or, under tcp-hier, in
    // the next collective's ring, e.g. because a third rank left) is not this one's business.
    if (slot(r).finished_seq.load(std::memory_order_seq_cst) >= seq_) continue;
    // A rank that left published everything of its last collective before it left (seq_cst
    // stores, then the status): it fails this wait only when this wait needs more of it.
    if (st == kStatusLeft && (field == nullptr || (slot(r).*field).load(std::memory_order_seq_cst) >= target)) {
      continue;
    }
    uint64_t blame = slot(r).blame.load(std::memory_order_relaxed);
    // A rank that failed because a peer aborted, timed out or left names it in blame: report
    // that root cause, as the ranks that saw it directly do, so every rank names the same one.
    int32_t cause = r;
    if (st == kStatusFailed && blame > 0 && blame - 1 < static_cast<uint64_t>(size_) &&
        static_cast<int32_t>(blame - 1) != rank_) {
      uint64_t cause_status = slot(static_cast<int32_t>(blame - 1)).status.load(std::memory_order_seq_cst);
      if (cause_status == kStatusAborted || cause_status == kStatusTimedOut || cause_status == kStatusLeft) {
        cause = static_cast<int32_t>(blame - 1);
        st = cause_status;
        blame = slot(cause).blame.load(std::memory_order_relaxed);
      }
    }
    std::string who = "rank " + std::to_string(cause);
    std::string culprit = blame > 0 ? "rank " + std::to_string(blame - 1) : "another rank";
    if (st == kStatusAborted) {
      slot(rank_).blame.store(static_cast<uint64_t>(cause) + 1, std::memory_order_relaxed);
      throw_error(NPG_REMOTE_ERROR, who + " aborted its communicator");
    }
    if (st == kStatusLeft) {
      slot(rank_).blame.store(static_cast<uint64_t>(cause) + 1, std::memory_order_relaxed);
      throw_error(NPG_REMOTE_ERROR, who + " closed its communicator");
    }
    if (st == kStatusTimedOut) {
      if (blame > 0) slot(rank_).blame.store(blame, std::memory_order_relaxed);  // the rank waited for
      throw_error(NPG_TIMEOUT, who + " timed out waiting for " + culprit);
    }
    // Name the root cause when it is visible from here too (the failed rank itself may
    // exit normally after failing, so only its culprit is checked).
    if (blame > 0 && static_cast<int32_t>(blame - 1) != rank_ && blame - 1 < static_cast<uint64_t>(size_)) {
      check_peers_alive({static_cast<int32_t>(blame - 1)});
    }
    throw_error(NPG_REMOTE_ERROR, who + " failed" + (blame > 0 ? " after losing " + culprit : std::string()));
  }
}

void ShmTransport::wait_peers(std::atomic<uint64_t> Slot::*field, uint64_t target, const Deadline& deadline,
                              const char* phase) {
  using Clock = std::chrono::steady_clock;
  if (peers_reached(field, target)) return;
  const auto start = Clock::now();
  auto next_liveness = start + kLivenessPeriod;
  for (unsigned spins = 1;; ++spins) {
    if (peers_reached(field, target)) return;
    if (abort_.triggered()) throw_aborted();
    check_peer_status(field, target);
    if (spins % 64 != 0) {
      cpu_relax();
      continue;
    }
    const auto now = Clock::now();
    if (now - start < spin_budget_) continue;
    const bool expired = deadline.expired();
    if (now >= next_liveness || expired) {
      std::vector<int32_t> missing;
      for (int32_t r = 0; r < size_; ++r) {
        if (r != rank_ && (slot(r).*field).load(std::memory_order_acquire) < target) missing.push_back(r);
      }
      if (missing.empty()) return;
      check_peers_alive(missing);
      if (expired) {
        slot(rank_).blame.store(static_cast<uint64_t>(missing[0]) + 1, std::memory_order_relaxed);
        throw_error(NPG_TIMEOUT, "timed out after " + std::to_string(deadline.budget_ms()) + " ms waiting for rank" +
                                     (missing.size() > 1 ? "s " : " ") + rank_list(missing) + " to " + phase);
      }
      next_liveness = now + kLivenessPeriod;
    }
    if (now - start < yield_budget_) {
      sched_yield();
      continue;
    }
    sleep_on_bell(field, target);
  }
}

void ShmTransport::verify_layout(const GatherArgs& args) {
  std::string problem = rejection_verdict(args, size_, [&](int32_t r) {
    return std::make_pair(post(r, args.seq).digest.load(std::memory_order_relaxed),
                          post(r, args.seq).send_bytes.load(std::memory_order_relaxed));
  });
  const uint64_t first = post(0, args.seq).digest.load(std::memory_order_relaxed);
  for (int32_t r = 1; r < size_ && problem.empty(); ++r) {
    if (post(r, args.seq).digest.load(std::memory_order_relaxed) != first) {
      problem = "rank " + std::to_string(r) + "'s recv_counts/recv_displs differ from rank 0's";
    }
  }
  for (int32_t r = 0; r < size_ && problem.empty(); ++r) {
    uint64_t bytes = post(r, args.seq).send_bytes.load(std::memory_order_relaxed);
    if (bytes != args.counts[r]) {
      problem = "rank " + std::to_string(r) + " sends " + std::to_string(bytes) + " bytes but recv_counts[" +
                std::to_string(r) + "] asks for " + std::to_string(args.counts[r]) + " bytes";
    }
  }
  // Every rank reads the same posts and reaches the same verdict; none has read a peer's
  // block yet, and the posts of this collective stay intact until every rank has left it.
  if (!problem.empty()) throw_error(NPG_INVALID_USAGE, "ranks disagree on receive counts: " + problem);
}

void ShmTransport::fill_post(const GatherArgs& args, bool eager) {
  Post& mine = post(rank_, args.seq);
  mine.send_bytes.store(args.send_bytes, std::memory_order_relaxed);
  mine.digest.store(args.digest, std::memory_order_relaxed);
  mine.eager.store(eager ? 1 : 0, std::memory_order_relaxed);
  if (eager) {
    copy_from_segments(args.segments, args.segment_count, 0, args.send_bytes, eager_block(rank_, args.seq));
    return;
  }
  mine.segments_addr.store(reinterpret_cast<uintptr_t>(args.segments), std::memory_order_relaxed);
  mine.segment_count.store(args.segment_count, std::memory_order_relaxed);
  for (size_t i = 0; i < args.segment_count && i < kInlineSegments; ++i) {
    mine.inline_segments[2 * i].store(reinterpret_cast<uintptr_t>(args.segments[i].address), std::memory_order_relaxed);
    mine.inline_segments[2 * i + 1].store(args.segments[i].bytes, std::memory_order_relaxed);
  }
}

void ShmTransport::copy_from_peer(int32_t peer, uint64_t seq, uint8_t* dst, uint64_t len) {
  if (len == 0) return;
  const Post& theirs = post(peer, seq);
  if (theirs.eager.load(std::memory_order_relaxed) != 0) {
    if (len > eager_capacity_) {
      throw_error(NPG_REMOTE_ERROR, "rank " + std::to_string(peer) + " posted an eager block of " +
                                        std::to_string(len) + " bytes; at most " + std::to_string(eager_capacity_) +
                                        " fit");
    }
    copy_block(dst, eager_block(peer, seq), len);
    return;
  }
  const uint64_t segments_addr = theirs.segments_addr.load(std::memory_order_relaxed);
  const uint64_t segment_count = theirs.segment_count.load(std::memory_order_relaxed);
  const auto* remote = reinterpret_cast<const npg_segment_t*>(static_cast<uintptr_t>(segments_addr));
  if (mode_ == Mode::kThreads) {
    copy_from_segments(remote, segment_count, 0, len, dst);
    return;
  }
  if (segment_count > NPG_MAX_SEGMENTS) {
    throw_error(NPG_REMOTE_ERROR, "rank " + std::to_string(peer) + " published " + std::to_string(segment_count) +
                                      " send segments; at most " + std::to_string(NPG_MAX_SEGMENTS) + " are allowed");
  }
  std::vector<npg_segment_t> segments(segment_count);
  if (segment_count <= kInlineSegments) {
    for (size_t i = 0; i < segment_count; ++i) {
      segments[i].address = reinterpret_cast<const void*>(
          static_cast<uintptr_t>(theirs.inline_segments[2 * i].load(std::memory_order_relaxed)));
      segments[i].bytes = theirs.inline_segments[2 * i + 1].load(std::memory_order_relaxed);
    }
  } else {
    npg_segment_t list{remote, segment_count * sizeof(npg_segment_t)};
    cma_read(peer, reinterpret_cast<uint8_t*>(segments.data()), &list, 1, list.bytes);
  }
  uint64_t total = 0;
  for (const npg_segment_t& segment : segments) {
    total += std::min<uint64_t>(segment.bytes, len + 1);  // cannot wrap: at most NPG_MAX_SEGMENTS terms
  }
  if (total != len) {
    throw_error(NPG_REMOTE_ERROR, "rank " + std::to_string(peer) + "'s send segments do not add up to its " +
                                      std::to_string(len) + " bytes");
  }
  cma_read(peer, dst, segments.data(), segments.size(), len);
}

void ShmTransport::cma_read(int32_t peer, uint8_t* dst, const npg_segment_t* segments, size_t count, uint64_t len) {
  uint64_t done = 0;
  size_t index = 0;     // first segment not read completely
  uint64_t offset = 0;  // bytes of it already read
  while (done < len) {
    if (abort_.triggered()) throw_aborted();
    iovec remote[kCmaIovecs];
    size_t pieces = 0;
    uint64_t want = 0;
    for (size_t i = index, skip = offset; i < count && pieces < kCmaIovecs && want < kCmaChunkBytes; ++i, skip = 0) {
      const uint64_t take = std::min(segments[i].bytes - skip, kCmaChunkBytes - want);
      if (take == 0) continue;
      remote[pieces++] = {const_cast<uint8_t*>(static_cast<const uint8_t*>(segments[i].address)) + skip, take};
      want += take;
    }
    iovec local{dst + done, want};
    ssize_t n = process_vm_readv(pids_[peer], &local, 1, remote, pieces, 0);
    if (n < 0) {
      int err = errno;
      if (err == EINTR) continue;
      if (err == ESRCH) {
        slot(rank_).blame.store(static_cast<uint64_t>(peer) + 1, std::memory_order_relaxed);
        throw_error(NPG_REMOTE_ERROR,
                    "rank " + std::to_string(peer) + " exited (pid " + std::to_string(pids_[peer]) + ")");
      }
      if (err == EFAULT) {
        throw_error(NPG_REMOTE_ERROR, "rank " + std::to_string(peer) + "'s send buffer is not readable");
      }
      throw_system_error("process_vm_readv from rank " + std::to_string(peer), err);
    }
    if (n == 0) throw_error(NPG_REMOTE_ERROR, "rank " + std::to_string(peer) + "'s send buffer ended early");
    done += static_cast<uint64_t>(n);
    for (uint64_t advance = static_cast<uint64_t>(n); advance > 0;) {
      const uint64_t step = std::min(advance, segments[index].bytes - offset);
      offset += step;
      advance -= step;
      if (offset == segments[index].bytes) {
        ++index;
        offset = 0;
      }
    }
  }
}

void ShmTransport::run_staging(const GatherArgs& args, const Deadline& deadline) {
  uint64_t max_block = 0;
  for (int32_t r = 0; r < size_; ++r) max_block = std::max(max_block, args.counts[r]);
  const uint64_t rounds = (max_block + chunk_ - 1) / chunk_;
  for (uint64_t k = 0; k < rounds; ++k) {
    const uint64_t off = k * chunk_;
    if (args.send_bytes > off) {
      copy_from_segments(args.segments, args.segment_count, off, std::min(chunk_, args.send_bytes - off),
                         staging(rank_));
    }
    const uint64_t round = ++stage_round_;
    publish(&Slot::stage_posted, round);
    wait_peers(&Slot::stage_posted, round, deadline, "fill the staging area");
    for (int32_t i = 1; i < size_; ++i) {
      int32_t r = (rank_ + i) % size_;
      if (args.counts[r] > off) {
        copy_block(args.recv + args.displs[r] + off, staging(r), std::min(chunk_, args.counts[r] - off));
      }
    }
    publish(&Slot::stage_done, round);
    wait_peers(&Slot::stage_done, round, deadline, "drain the staging area");
  }
}

void ShmTransport::all_gather_v(const GatherArgs& args, const Deadline& deadline) {
  Slot& mine = slot(rank_);
  seq_ = args.seq;
  // A small block goes into this rank's post, so no peer reads the send buffer.
  fill_post(args, args.send_bytes <= eager_limit_);
  publish(&Slot::posted_seq, args.seq);
  try {
    wait_peers(&Slot::posted_seq, args.seq, deadline, "join the collective");
  } catch (const Error& e) {
    leave_after_failure(args.seq, e.code());
    throw;
  }
  // Every rank sees the same posts, so all agree whether a peer reads a send buffer; when
  // none does, the collective ends here: nothing of this rank is read after it returns
  // but its post, which stays intact until every peer has finished (Post).
  bool all_eager = true;
  for (int32_t r = 0; r < size_ && all_eager; ++r)
    all_eager = post(r, args.seq).eager.load(std::memory_order_relaxed) != 0;
  verify_layout(args);
  try {
    args.write_own_block();
    if (all_eager) {
      check_peer_status();  // a peer that failed or aborted after posting fails this rank too
      for (int32_t i = 1; i < size_; ++i) {
        const int32_t r = (rank_ + i) % size_;
        copy_from_peer(r, args.seq, args.recv + args.displs[r], args.counts[r]);
      }
      mine.finished_seq.store(args.seq, std::memory_order_release);
      return;
    }
    if (mode_ == Mode::kStaging) {
      run_staging(args, deadline);
    } else {
      // Pairs with leave_after_failure: either this rank sees the peer's failure here, or
      // the failing peer sees reading == seq and waits before its buffer may be freed.
      mine.reading.store(args.seq, std::memory_order_seq_cst);
      check_peer_status();
      for (int32_t i = 1; i < size_; ++i) {
        const int32_t r = (rank_ + i) % size_;
        copy_from_peer(r, args.seq, args.recv + args.displs[r], args.counts[r]);
      }
    }
    mine.reading.store(0, std::memory_order_release);
    publish(&Slot::done_seq, args.seq);
    // Peers may still be reading this rank's send buffer.
    wait_peers(&Slot::done_seq, args.seq, deadline, "finish the collective");
    mine.finished_seq.store(args.seq, std::memory_order_release);
  } catch (const Error& e) {
    mine.reading.store(0, std::memory_order_release);
    leave_after_failure(args.seq, e.code());
    throw;
  } catch (...) {
    mine.reading.store(0, std::memory_order_release);
    leave_after_failure(args.seq, NPG_INTERNAL_ERROR);
    throw;
  }
}

void ShmTransport::leave_after_failure(uint64_t seq, npg_result_t code) noexcept {
  Slot& mine = slot(rank_);
  uint64_t status = abort_.triggered() ? kStatusAborted : code == NPG_TIMEOUT ? kStatusTimedOut : kStatusFailed;
  uint64_t expected = kStatusOk;
  mine.status.compare_exchange_strong(expected, status, std::memory_order_seq_cst);
  wake_sleepers();
  // The caller may free its send buffer as soon as this returns: wait for peers that are
  // copying from it right now (bounded: they only copy, and exited processes read nothing).
  if (mode_ == Mode::kStaging) return;
  const auto limit = std::chrono::steady_clock::now() + kDrainLimit;
  for (int32_t r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    int sleep_us = 1;
    while (slot(r).reading.load(std::memory_order_seq_cst) == seq && std::chrono::steady_clock::now() < limit) {
      try {
        check_peers_alive({r});
      } catch (...) {
        break;  // an exited peer reads nothing any more
      }
      std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
      sleep_us = std::min(sleep_us * 2, 100);
    }
  }
}

void ShmTransport::on_abort() noexcept {
  if (segment_.data() == nullptr) return;
  slot(rank_).status.store(kStatusAborted, std::memory_order_seq_cst);
  wake_sleepers();
}

void ShmTransport::on_failure() noexcept {
  if (segment_.data() == nullptr) return;
  uint64_t expected = kStatusOk;
  slot(rank_).status.compare_exchange_strong(expected, kStatusFailed, std::memory_order_seq_cst);
  wake_sleepers();
}

void ShmTransport::on_leave() noexcept {
  if (segment_.data() == nullptr) return;
  // Peers that wait for this rank in a later collective fail at once instead of at their
  // deadline. A rank that failed, aborted or timed out keeps that status.
  uint64_t expected = kStatusOk;
  slot(rank_).status.compare_exchange_strong(expected, kStatusLeft, std::memory_order_seq_cst);
  wake_sleepers();
}

void ShmTransport::close() {
  int err = segment_.close();
  for (auto& fd : pidfds_) {
    int e = fd.reset();
    if (err == 0) err = e;
  }
  if (err != 0) throw_system_error("releasing shared memory", err);
}

}  // namespace host
}  // namespace npg
