#include "huge_pages.h"

#include <sys/mman.h>
#include <unistd.h>

namespace npg {

void advise_huge_pages(void* address, uint64_t bytes) noexcept {
  if (address == nullptr || bytes < NPG_HUGE_PAGE_ADVICE_MIN_BYTES) return;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(address);
  if (bytes > UINTPTR_MAX - begin) return;
  const uintptr_t first = (begin + page - 1) & ~(page - 1);
  const uintptr_t last = (begin + bytes) & ~(page - 1);
  if (last > first) (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

void populate_pages(void* address, uint64_t bytes) noexcept {
  if (address == nullptr || bytes == 0) return;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(address);
  if (bytes > UINTPTR_MAX - begin) return;
  const uintptr_t end = begin + bytes;
  // One write fault per page, each an atomic add of zero to a byte of the range: no byte changes,
  // also while other threads write into the page. A fault holds only its own mapping's lock
  // (the process-wide lock only briefly, on kernels without per-mapping locks), where
  // MADV_POPULATE_WRITE would hold the process's memory-map lock over the whole range and stall
  // every mmap of the process meanwhile (a communicator's set-up, a thread's stack, the JVM's
  // heap). Relaxed order: the fault is the point, not the value.
  for (uintptr_t at = begin; at < end; at = (at & ~(page - 1)) + page) {
    __atomic_fetch_add(reinterpret_cast<uint8_t*>(at), uint8_t{0}, __ATOMIC_RELAXED);
  }
}

}  // namespace npg
