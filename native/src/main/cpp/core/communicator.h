// The interface every backend implements; the C ABI sees nothing else.
#ifndef NPUGATHER_CORE_COMMUNICATOR_H_
#define NPUGATHER_CORE_COMMUNICATOR_H_

#include <stddef.h>
#include <stdint.h>

#include <string>

#include "npugather.h"

namespace npg {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int32_t rank() const = 0;
  virtual int32_t size() const = 0;
  virtual const char* transport() const = 0;

  // Rank r's counts_bytes[r] bytes land at recv + displs_bytes[r] on every rank. This
  // rank's block is the concatenation of segments; it is copied to its own place in recv
  // only when write_own. Arguments are validated by the caller: the segments add up to
  // counts_bytes[rank], regions of different ranks do not overlap, no sum overflows.
  virtual void all_gather_v(const npg_segment_t* segments, size_t segment_count, bool write_own, void* recv,
                            const uint64_t* counts_bytes, const uint64_t* displs_bytes) = 0;

  // Most device memory the last collective held at once (0 for backends without a device).
  virtual uint64_t device_bytes() const { return 0; }

  // This rank rejected its own arguments to the collective it was called for (reason says
  // why). Takes part in that collective anyway, so that peers waiting in it fail at once:
  // throws the INVALID_USAGE every rank then raises, naming each rejecting rank and its
  // reason. Returns (and the caller reports its own error) where peers cannot be told.
  virtual void reject(const std::string& reason) { (void)reason; }

  // Thread-safe, may run concurrently with all_gather_v: blocked and later calls
  // fail with NPG_ABORTED, peers see NPG_REMOTE_ERROR.
  virtual void abort() noexcept = 0;

  // Releases everything; tries every step and throws the first failure.
  virtual void close() = 0;
};

}  // namespace npg

#endif  // NPUGATHER_CORE_COMMUNICATOR_H_
