#include "host_transport.h"

#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

#include "../core/block_copy.h"
#include "../core/error.h"
#include "../core/huge_pages.h"

namespace npg {
namespace host {

void GatherArgs::write_own_block() const {
  if (write_own) copy_from_segments(segments, segment_count, 0, send_bytes, recv + displs[rank]);
}

void copy_from_segments(const npg_segment_t* segments, size_t count, uint64_t offset, uint64_t len, uint8_t* dst) {
  for (size_t i = 0; i < count && len > 0; ++i) {
    const uint64_t bytes = segments[i].bytes;
    if (offset >= bytes) {
      offset -= bytes;
      continue;
    }
    const uint64_t take = std::min(bytes - offset, len);
    copy_block(dst, static_cast<const uint8_t*>(segments[i].address) + offset, take);
    dst += take;
    len -= take;
    offset = 0;
  }
}

void GatherArgs::advise_huge_pages(int32_t size) const {
  uint64_t begin = UINT64_MAX;
  uint64_t end = 0;
  for (int32_t r = 0; r < size; ++r) {
    if (counts[r] == 0 || (r == rank && !write_own)) continue;
    begin = std::min(begin, displs[r]);
    end = std::max(end, displs[r] + counts[r]);
  }
  if (end > begin) npg::advise_huge_pages(recv + begin, end - begin);
}

uint64_t GatherArgs::total_bytes(int32_t size) const {
  uint64_t total = 0;
  for (int32_t r = 0; r < size; ++r) total += counts[r];
  return total;
}

uint64_t counts_digest(int32_t size, const uint64_t* counts) {
  // FNV-1a over the 64-bit words, finished with a splitmix64 mix.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(static_cast<uint64_t>(size));
  for (int32_t r = 0; r < size; ++r) mix(counts[r]);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h == kRejectedDigest ? ~h : h;
}

AbortSignal::AbortSignal() : fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!fd_) throw_system_error("eventfd", errno);
}

void AbortSignal::trigger() noexcept {
  flag_.store(true, std::memory_order_release);
  uint64_t one = 1;
  if (fd_) {
    ssize_t n = write(fd_.get(), &one, sizeof(one));
    (void)n;  // EAGAIN means it is already readable
  }
}

void throw_aborted() { throw_error(NPG_ABORTED, "communicator was aborted by npg_comm_abort"); }

}  // namespace host
}  // namespace npg
