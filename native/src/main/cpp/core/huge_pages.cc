#include "huge_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels refuse it with EINVAL
#endif

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
  const uintptr_t first = begin & ~(page - 1);
  const uintptr_t last = (begin + bytes + page - 1) & ~(page - 1);
  // Failures leave the pages to be faulted in by the first write, as without the call.
  (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_POPULATE_WRITE);
}

}  // namespace npg
