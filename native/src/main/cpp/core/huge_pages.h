// Transparent huge pages for large buffers that are about to be written for the first time.
#ifndef NPUGATHER_CORE_HUGE_PAGES_H_
#define NPUGATHER_CORE_HUGE_PAGES_H_

#include <stdint.h>

#include "npugather.h"

namespace npg {

// madvise(MADV_HUGEPAGE) over the whole pages inside [address, address + bytes) when bytes is
// at least NPG_HUGE_PAGE_ADVICE_MIN_BYTES (below it a buffer holds few 2 MiB pages and the
// system call would cost more than it saves): a fresh buffer is then faulted in 2 MiB at a time instead of
// 4 KiB. A hint only: memory that cannot take it (shared or file mappings) keeps its pages.
void advise_huge_pages(void* address, uint64_t bytes) noexcept;

// Faults in the pages of [address, address + bytes), which must be writable memory of this
// process and stay mapped until the call returns, without changing a byte (one atomic add of
// zero per page), so that the first write into them does not trap page by page. Safe while
// other threads write into the range: every byte they write is kept.
void populate_pages(void* address, uint64_t bytes) noexcept;

}  // namespace npg

#endif  // NPUGATHER_CORE_HUGE_PAGES_H_
