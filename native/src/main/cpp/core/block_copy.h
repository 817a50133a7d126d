// Copies of blocks between user buffers and the transports' own buffers.
#ifndef NPUGATHER_CORE_BLOCK_COPY_H_
#define NPUGATHER_CORE_BLOCK_COPY_H_

#include <stdint.h>

namespace npg {

// From this many bytes a copy streams (docs/performance/2026-12-large-copies-and-tcp-read-ahead.md):
// the destination is larger than a core's share of the last-level cache, so caching it only
// evicts other data, and the ordinary store first reads each destination line into the cache
// (read for ownership), a third of the copy's memory traffic. Below it the destination often
// stays cached and the ordinary copy is faster (measured at 4 MiB).
constexpr uint64_t kStreamCopyMinBytes = 8ull << 20;

// From this many bytes glibc's x86-64 memcpy may copy with `rep movsb`, which on CPUs with fast
// short `rep movsb` (AMD Zen 3 and later, measured here) runs 15x slower when the destination
// lies 1 to 127 bytes past the source modulo the 4 KiB page
// (docs/performance/2026-12-aliasing-copies.md). Smaller copies use vector moves and are not affected.
constexpr uint64_t kAliasedCopyMinBytes = 2048;

// memcpy(dst, src, len) for buffers that do not overlap, at the same speed whatever the
// buffers' relative alignment. On x86-64: from kStreamCopyMinBytes on with non-temporal
// stores, fenced before it returns so that the bytes are ordered before any later store of
// this thread (a flag that publishes them, say), as after memcpy; below it, when the addresses
// nearly alias, with a vector loop instead of memcpy.
void copy_block(uint8_t* dst, const uint8_t* src, uint64_t len) noexcept;

}  // namespace npg

#endif  // NPUGATHER_CORE_BLOCK_COPY_H_
