// The small interface the host communicator drives: one transport moves the blocks.
#ifndef NPUGATHER_HOST_HOST_TRANSPORT_H_
#define NPUGATHER_HOST_HOST_TRANSPORT_H_

#include <stdint.h>

#include <atomic>
#include <string>

#include "socket_util.h"

namespace npg {
namespace host {

// One collective, in bytes. Regions of different ranks in recv do not overlap.
struct GatherArgs {
  const uint8_t* send = nullptr;
  uint64_t send_bytes = 0;
  uint8_t* recv = nullptr;
  const uint64_t* counts = nullptr;
  const uint64_t* displs = nullptr;
  uint64_t seq = 0;     // 1, 2, ... identical on all ranks for the same collective
  uint64_t digest = 0;  // layout_digest of counts/displs
  int32_t rank = 0;
  // Own bytes already sit at their place in recv (or there are none).
  bool in_place() const;
  uint64_t total_bytes(int32_t size) const;
};

// Digest of the layout every rank must agree on.
uint64_t layout_digest(int32_t size, const uint64_t* counts, const uint64_t* displs);

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
  // Releases resources; tries every step and throws the first failure.
  virtual void close() = 0;
};

}  // namespace host
}  // namespace npg

#endif  // NPUGATHER_HOST_HOST_TRANSPORT_H_
