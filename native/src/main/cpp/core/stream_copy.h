// Copies of large blocks into receive buffers, bypassing the caches on the way out.
#ifndef NPUGATHER_CORE_STREAM_COPY_H_
#define NPUGATHER_CORE_STREAM_COPY_H_

#include <stdint.h>

namespace npg {

// From this many bytes a copy streams (docs/performance.md, "Large copies stream past the
// cache"): the destination is larger than a core's share of the last-level cache, so caching
// it only evicts other data, and the ordinary store first reads each destination line into
// the cache (read for ownership), a third of the copy's memory traffic. Below it the
// destination often stays cached and the ordinary copy is faster (measured at 4 MiB).
constexpr uint64_t kStreamCopyMinBytes = 8ull << 20;

// memcpy(dst, src, len) for buffers that do not overlap; on x86-64, from kStreamCopyMinBytes
// on, with non-temporal stores, fenced before it returns so that the bytes are ordered before
// any later store of this thread (a flag that publishes them, say), as after memcpy.
void stream_copy(uint8_t* dst, const uint8_t* src, uint64_t len) noexcept;

}  // namespace npg

#endif  // NPUGATHER_CORE_STREAM_COPY_H_
