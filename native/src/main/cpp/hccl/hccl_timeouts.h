// HCCL_CONNECT_TIMEOUT and HCCL_EXEC_TIMEOUT, which HCCL reads once per process, at the
// process's first HCCL call (HcclGetRootInfo on the root, HcclCommInit* elsewhere): values
// set later are never seen. Every rank of a communicator must run with the same values.
#ifndef NPUGATHER_HCCL_HCCL_TIMEOUTS_H_
#define NPUGATHER_HCCL_HCCL_TIMEOUTS_H_

#include <stdint.h>

#include <string>

namespace npg {
namespace hccl {

// In seconds, as HCCL reads them.
struct HcclTimeouts {
  uint32_t connect_s = 0;
  uint32_t exec_s = 0;
  bool operator==(const HcclTimeouts& o) const { return connect_s == o.connect_s && exec_s == o.exec_s; }
};

// HCCL's documented ranges: HCCL_CONNECT_TIMEOUT [120, 7200] s. HCCL_EXEC_TIMEOUT: 0 means
// "wait forever" and is never used; [0, 2147483647] on A2/A3 (host and AI CPU expansion),
// (0, 17340] rounded down to a multiple of 68 on the Atlas training series, while AIV mode
// clamps anything above 1091 to 1091 itself: [68, 17340] means the same everywhere.
// HCCL's defaults when unset: 120 s and 1836 s.
HcclTimeouts timeouts_for(int64_t timeout_ms);

// Called before each HCCL call that may be the process's first. The first call fixes the
// process's values: the user's HCCL_CONNECT_TIMEOUT / HCCL_EXEC_TIMEOUT where set, else
// wanted's (published to the environment), else HCCL's defaults. Returns them.
HcclTimeouts latch_timeouts(const HcclTimeouts* wanted);

// Before joining a communicator whose root latched root's values: latches them here, or throws
// NPG_INVALID_USAGE naming both sets when this process runs (or the user set) others. where
// names the rank.
void join_timeouts(const HcclTimeouts& root, const std::string& where);

}  // namespace hccl
}  // namespace npg

#endif  // NPUGATHER_HCCL_HCCL_TIMEOUTS_H_
