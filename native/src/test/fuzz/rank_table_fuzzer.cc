// libFuzzer target over the HCCL rank table parser (the JSON a cluster hands the ranks).
// Any text may be rejected with npg::Error; nothing else may happen.
#include <stddef.h>
#include <stdint.h>

#include <string>

#include "core/error.h"
#include "hccl/rank_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte is the caller's rank_size (1..16); rank 0 asks.
  const int32_t rank_size = 1 + data[0] % 16;
  std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    npg::hccl::parse_rank_table("/fuzz/rank_table.json", text, 0, rank_size);
  } catch (const npg::Error&) {
  }
  return 0;
}
