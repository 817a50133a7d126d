// How a device gather is cut into rounds: every round's buffers fit a bounded device budget and
// every collective call stays under the vendor's count limit, whatever the total size.
#ifndef NPUGATHER_CANN_DEVICE_ROUNDS_H_
#define NPUGATHER_CANN_DEVICE_ROUNDS_H_

#include <stdint.h>

#include <string>

namespace npg {
namespace cann {

// The environment variable that bounds the device memory one gather holds, in bytes (suffixes
// K, M, G: binary units). Unset: half the device's free memory at the call (aclrtGetMemInfo).
constexpr const char* kDeviceBufferVariable = "NPUGATHER_DEVICE_BUFFER_BYTES";
// The smallest budget accepted: a round must move a useful slice of every rank.
constexpr uint64_t kMinDeviceBufferBytes = 64 * 1024;
// The budget when the runtime cannot tell the free memory (no aclrtGetMemInfo).
constexpr uint64_t kDeviceBufferWithoutMemInfo = 1ull << 30;

struct RoundPlan {
  uint64_t chunk = 0;   // bytes of each rank's block moved per round (the last round may move less)
  uint64_t rounds = 0;  // ceil(largest block / chunk); 1 when everything fits at once
  // Two receive buffers, so that round k+1's transfer overlaps round k's copy to the host.
  bool double_buffered = false;
  uint64_t device_bytes = 0;  // send + receive buffers held at once
};

// Plans a gather of ranks blocks of at most largest_block bytes within budget bytes of device
// memory, each call moving at most max_call_bytes per rank. One round when the block and the
// ranks' blocks fit (send + ranks * block); otherwise rounds of a chunk such that send + two
// receive buffers, (2 * ranks + 1) * chunk, fit. Throws NPG_INVALID_ARGUMENT when the budget
// cannot hold a round of one byte per rank.
RoundPlan plan_rounds(uint64_t largest_block, int32_t ranks, uint64_t budget, uint64_t max_call_bytes);

// Parses kDeviceBufferVariable's value ("268435456", "256M", "4G"); NPG_INVALID_ARGUMENT naming
// the variable, the value and what is allowed.
uint64_t parse_device_buffer_bytes(const std::string& text);

}  // namespace cann
}  // namespace npg

#endif  // NPUGATHER_CANN_DEVICE_ROUNDS_H_
