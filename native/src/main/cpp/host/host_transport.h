// The small interface the host communicator drives: one transport moves the blocks.
#ifndef NPUGATHER_HOST_HOST_TRANSPORT_H_
#define NPUGATHER_HOST_HOST_TRANSPORT_H_

#include <stdint.h>

#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "npugather.h"
#include "socket_util.h"

namespace npg {
namespace host {

// The digest of a rank that rejected its own arguments and takes part in the collective only
// to say so; its send size is the length of its error text. counts_digest never returns it.
constexpr uint64_t kRejectedDigest = 0x52454a4543544544ull;  // "REJECTED"

// One collective, in bytes. Regions of different ranks in recv do not overlap.
struct GatherArgs {
  const npg_segment_t* segments = nullptr;  // this rank's block, in order
  size_t segment_count = 0;
  uint64_t send_bytes = 0;  // sum of the segments' bytes
  bool write_own = false;   // copy this rank's block to its place in recv
  uint8_t* recv = nullptr;
  const uint64_t* counts = nullptr;
  const uint64_t* displs = nullptr;
  uint64_t seq = 0;     // 1, 2, ... identical on all ranks for the same collective
  uint64_t digest = 0;  // counts_digest of counts
  int32_t rank = 0;
  // Filled by the transport's verdict: per rank, the length of its error text if it rejected
  // its arguments (digest kRejectedDigest), else 0.
  std::vector<uint64_t>* rejections = nullptr;
  uint64_t total_bytes(int32_t size) const;
  // Copies this rank's block to its place in recv when write_own.
  void write_own_block() const;
  // Asks the kernel for transparent huge pages over the receive regions (4 MiB or more): a
  // freshly allocated buffer then takes one page fault per 2 MiB instead of one per 4 KiB,
  // which on first touch costs more than the copy itself.
  void advise_huge_pages(int32_t size) const;
};

// Copies bytes [offset, offset + len) of the concatenation of segments to dst, each piece with
// copy_block.
void copy_from_segments(const npg_segment_t* segments, size_t count, uint64_t offset, uint64_t len, uint8_t* dst);

// Records the ranks whose digest is kRejectedDigest (header_of(r) gives rank r's digest and
// send size) in args.rejections; returns the verdict text, or "" when no rank rejected.
template <typename HeaderOf>
std::string rejection_verdict(const GatherArgs& args, int32_t size, HeaderOf&& header_of) {
  std::string ranks;
  for (int32_t r = 0; r < size; ++r) {
    auto header = header_of(r);  // {digest, send bytes}
    if (header.first != kRejectedDigest) continue;
    if (args.rejections != nullptr) (*args.rejections)[r] = header.second;
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  }
  return ranks.empty() ? ranks : "rank(s) " + ranks + " rejected their arguments";
}

// Digest of the receive counts, which every rank must agree on. Displacements are each
// rank's own receive layout and may differ between ranks.
uint64_t counts_digest(int32_t size, const uint64_t* counts);

// Abort flag plus an eventfd that wakes poll()s; shared by the communicator and its transport.
class AbortSignal {
 public:
  AbortSignal();
  void trigger() noexcept;
  bool triggered() const { return flag_.load(std::memory_order_acquire); }
  int fd() const { return fd_.get(); }
  int close() noexcept { return fd_.reset(); }

 private:
  std::atomic<bool> flag_{false};
  UniqueFd fd_;
};

[[noreturn]] void throw_aborted();

class HostTransport {
 public:
  virtual ~HostTransport() = default;
  virtual const char* name() const = 0;
  virtual void all_gather_v(const GatherArgs& args, const Deadline& deadline) = 0;
  // From any thread, after the abort signal was triggered: let peers know promptly.
  virtual void on_abort() noexcept = 0;
  // This rank failed (not a timeout): let peers fail instead of waiting for it.
  virtual void on_failure() noexcept = 0;
  // This rank closes its communicator, not after a failure or abort: let peers that wait for
  // it (in a later collective; it finished its last one) fail at once. Before close().
  virtual void on_leave() noexcept {}
  // Releases resources; tries every step and throws the first failure.
  virtual void close() = 0;
};

}  // namespace host
}  // namespace npg

#endif  // NPUGATHER_HOST_HOST_TRANSPORT_H_
