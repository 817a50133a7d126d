#include "root_info_header.h"

#include <string.h>

#include <string>

#include "../core/error.h"

namespace npg {
namespace cann {
namespace {

void write_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint32_t read_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

void write_root_info_header(const RootInfoFormat& format, uint8_t* out) {
  memcpy(out, format.magic, sizeof(format.magic));
  write_u32(out + 8, format.version);
  write_u32(out + 12, format.payload_bytes);
}

void check_root_info_header(const RootInfoFormat& format, const void* data, size_t size) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  const std::string backend = format.backend;
  if (size < kRootInfoHeaderBytes || memcmp(p, format.magic, sizeof(format.magic)) != 0) {
    throw_error(NPG_INVALID_ARGUMENT, "root_info (" + std::to_string(size) + " bytes) is not a root info of backend " +
                                          backend + "; pass the bytes that npg_get_root_info(\"" + backend +
                                          "\") wrote on the root rank (a root info of another backend cannot be "
                                          "used with backend " +
                                          backend + ")");
  }
  const uint32_t version = read_u32(p + 8);
  const uint32_t payload = read_u32(p + 12);
  if (version != format.version || payload != format.payload_bytes || size != format.total_bytes) {
    throw_error(NPG_INVALID_ARGUMENT,
                "root_info has version " + std::to_string(version) + ", payload " + std::to_string(payload) +
                    " bytes, size " + std::to_string(size) + "; this library expects version " +
                    std::to_string(format.version) + ", " + std::to_string(format.payload_bytes) + " and " +
                    std::to_string(format.total_bytes) + " (all ranks must run the same NpuGather version)");
  }
}

}  // namespace cann
}  // namespace npg
