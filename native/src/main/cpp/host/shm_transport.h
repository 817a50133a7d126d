// Same-host transport over a shared control segment: "threads" (memcpy from the peer's
// buffer), "cma" (process_vm_readv from the peer process) or "staging" (chunks copied
// through a shared staging area). In every mode, blocks up to the eager limit travel
// eagerly: the rank copies its block into its post in the segment and peers copy it out.
#ifndef NPUGATHER_HOST_SHM_TRANSPORT_H_
#define NPUGATHER_HOST_SHM_TRANSPORT_H_

#include <stdint.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <vector>

#include "host_transport.h"
#include "npugather.h"
#include "shm_segment.h"
#include "socket_util.h"

namespace npg {
namespace host {

constexpr uint64_t kDefaultStagingChunkBytes = 4ull << 20;

// NPUGATHER_STAGING_CHUNK_BYTES if set and sane, else kDefaultStagingChunkBytes.
uint64_t staging_chunk_bytes_from_env();

// Blocks up to this many bytes travel eagerly (measured crossovers:
// docs/performance/2026-12-shm-waits-and-eager-path.md; oversubscribed:
// docs/performance/2026-12-open-mpi-quiet-machine.md): the eager copy through the segment costs
// more than reading the peer's buffer directly, and saves a system call (cma) and the done round.
// Ranks as threads read directly at no such cost, unless the host's ranks outnumber its CPUs,
// where every round costs context switches.
constexpr uint64_t kEagerBytes = 8ull << 10;
constexpr uint64_t kOversubscribedEagerBytes = 256ull << 10;
// NPUGATHER_EAGER_BYTES if set and a number (0: never eager), else the default above. Each
// rank decides for its own block alone, so ranks may differ.
uint64_t eager_bytes_from_env(bool threads, bool oversubscribed);

// True when process_vm_readv of pid's canary at addr returns value.
bool cma_probe(pid_t pid, uint64_t addr, uint64_t value);

class ShmTransport final : public HostTransport {
 public:
  enum class Mode { kThreads, kCma, kStaging };

  // Bytes of the segment; the staging area exists only when with_staging.
  static size_t segment_bytes(int32_t size, bool with_staging, uint64_t chunk);
  // Room for an eager block in each post: at most 256 KiB, less from 16 ranks on so that
  // all posts together stay within 8 MiB.
  static uint64_t eager_capacity(int32_t size);
  // Creator: writes the header of a fresh (zeroed) segment.
  static void format(uint8_t* base, int32_t size, uint64_t chunk);
  // Attacher: checks the header the creator wrote.
  static void check_format(const uint8_t* base, int32_t size, uint64_t chunk);

  // pids[r] is rank r's process; peers in other processes are watched for exit.
  ShmTransport(ShmSegment segment, Mode mode, int32_t rank, int32_t size, uint64_t chunk,
               const std::vector<int32_t>& pids, AbortSignal& abort);

  const char* name() const override;
  void all_gather_v(const GatherArgs& args, const Deadline& deadline) override;
  void on_abort() noexcept override;
  void on_failure() noexcept override;
  void on_leave() noexcept override;
  void close() override;

  static constexpr size_t kInlineSegments = 8;  // segments published in the post itself
  struct Slot;
  struct Header;
  struct Post;

 private:
  Slot& slot(int32_t r) const;
  Header& header() const;
  // Rank r's post for collective seq (one of two, by the parity of seq) and its eager block.
  Post& post(int32_t r, uint64_t seq) const;
  uint8_t* eager_block(int32_t r, uint64_t seq) const;
  // Fills this rank's post for args.seq: the layout, and the block itself or where it lies.
  void fill_post(const GatherArgs& args, bool eager);
  // Stores this rank's field, then wakes any rank sleeping on the bell.
  void publish(std::atomic<uint64_t> Slot::*field, uint64_t value);
  void wake_sleepers() noexcept;
  bool peers_reached(std::atomic<uint64_t> Slot::*field, uint64_t target) const;
  // One bounded futex sleep until a peer publishes (or kBellSleepNs pass).
  void sleep_on_bell(std::atomic<uint64_t> Slot::*field, uint64_t target);
  uint8_t* staging(int32_t r) const;
  // Returns once field of every peer >= target; throws on abort, deadline, peer failure or exit.
  void wait_peers(std::atomic<uint64_t> Slot::*field, uint64_t target, const Deadline& deadline, const char* phase);
  void check_peers_alive(const std::vector<int32_t>& missing);
  // Throws when a peer has failed, aborted or timed out before it finished this collective
  // (seq_), or has
  // closed its communicator while this rank waits for more of it (its field below target; a
  // check outside a wait passes no field and passes peers that left).
  void check_peer_status(std::atomic<uint64_t> Slot::*field = nullptr, uint64_t target = 0);
  // Publishes this rank's failure and waits until no peer is copying from its send buffer.
  void leave_after_failure(uint64_t seq, npg_result_t code) noexcept;
  // Throws INVALID_USAGE, the same on every rank, when the posts disagree on the layout.
  void verify_layout(const GatherArgs& args);
  // Copies peer's block for collective seq to dst: out of its post when eager, else from the
  // segments it published.
  void copy_from_peer(int32_t peer, uint64_t seq, uint8_t* dst, uint64_t len);
  // Reads the concatenation of segments (addresses in peer's memory, adding up to len) to
  // dst with process_vm_readv, many segments per call, abortable between calls.
  void cma_read(int32_t peer, uint8_t* dst, const npg_segment_t* segments, size_t count, uint64_t len);
  void run_staging(const GatherArgs& args, const Deadline& deadline);

  ShmSegment segment_;
  Mode mode_;
  int32_t rank_;
  int32_t size_;
  uint64_t chunk_;
  uint64_t eager_capacity_;
  uint64_t eager_limit_;  // this rank's block goes eagerly up to this many bytes
  std::vector<int32_t> pids_;
  std::vector<UniqueFd> pidfds_;  // empty fd: same process or pidfd unsupported
  AbortSignal& abort_;
  std::chrono::nanoseconds spin_budget_;
  std::chrono::nanoseconds yield_budget_;  // then yields until this long has passed
  uint64_t stage_round_ = 0;
  uint64_t seq_ = 0;  // the collective running
};

}  // namespace host
}  // namespace npg

#endif  // NPUGATHER_HOST_SHM_TRANSPORT_H_
