#include "device_rounds.h"

#include <errno.h>
#include <stdlib.h>

#include <algorithm>

#include "../core/error.h"

namespace npg {
namespace cann {
namespace {

// Round slices are cut at this alignment when they are larger, so copies stay aligned.
constexpr uint64_t kChunkAlignment = 4096;

}  // namespace

RoundPlan plan_rounds(uint64_t largest_block, int32_t ranks, uint64_t budget, uint64_t max_call_bytes) {
  if (ranks <= 0) throw_error(NPG_INTERNAL_ERROR, "plan_rounds: ranks " + std::to_string(ranks));
  const uint64_t n = static_cast<uint64_t>(ranks);
  RoundPlan plan;
  if (largest_block == 0) {
    plan.chunk = 0;
    plan.rounds = 0;
    return plan;
  }
  const bool fits_call = largest_block <= max_call_bytes;
  const bool fits_budget = largest_block <= budget / (n + 1);
  if (fits_call && fits_budget) {
    plan.chunk = largest_block;
    plan.rounds = 1;
    plan.device_bytes = (n + 1) * largest_block;
    return plan;
  }
  uint64_t chunk = std::min(max_call_bytes, budget / (2 * n + 1));
  if (chunk >= 2 * kChunkAlignment) chunk -= chunk % kChunkAlignment;
  if (chunk == 0) {
    throw_error(NPG_INVALID_ARGUMENT, "a device buffer of " + std::to_string(budget) +
                                          " bytes cannot hold one round of " + std::to_string(ranks) +
                                          " ranks (at least " + std::to_string(2 * n + 1) + " bytes); raise " +
                                          kDeviceBufferVariable);
  }
  plan.chunk = chunk;
  plan.rounds = largest_block / chunk + (largest_block % chunk != 0);
  plan.double_buffered = plan.rounds > 1;
  plan.device_bytes = (plan.double_buffered ? 2 * n + 1 : n + 1) * chunk;
  return plan;
}

uint64_t parse_device_buffer_bytes(const std::string& text) {
  const std::string allowed = std::string(" (allowed: bytes as an integer of at least ") +
                              std::to_string(kMinDeviceBufferBytes) + ", or with a suffix K, M or G, e.g. 512M)";
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = text.empty() || text[0] == '-' ? 0 : strtoull(text.c_str(), &end, 10);
  uint64_t unit = 1;
  if (end != nullptr && *end != '\0' && end[1] == '\0') {
    switch (*end) {
      case 'K':
      case 'k':
        unit = 1ull << 10;
        ++end;
        break;
      case 'M':
      case 'm':
        unit = 1ull << 20;
        ++end;
        break;
      case 'G':
      case 'g':
        unit = 1ull << 30;
        ++end;
        break;
    }
  }
  if (end == nullptr || end == text.c_str() || *end != '\0' || errno != 0 || value > UINT64_MAX / unit ||
      value * unit < kMinDeviceBufferBytes) {
    throw_error(NPG_INVALID_ARGUMENT,
                std::string(kDeviceBufferVariable) + "=\"" + text + "\" is not a device buffer size" + allowed);
  }
  return value * unit;
}

}  // namespace cann
}  // namespace npg
