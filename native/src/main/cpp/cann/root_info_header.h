// The 16-byte header the device backends put before their root info: a magic naming the
// backend, a version and the vendor payload's size, so that a root info of another backend
// (or of another version of this library) fails clearly instead of reaching the vendor.
#ifndef NPUGATHER_CANN_ROOT_INFO_HEADER_H_
#define NPUGATHER_CANN_ROOT_INFO_HEADER_H_

#include <stddef.h>
#include <stdint.h>

namespace npg {
namespace cann {

constexpr size_t kRootInfoHeaderBytes = 16;

struct RootInfoFormat {
  const char* backend;  // "hccl"
  char magic[8];        // "NPGHCCL"
  uint32_t version;
  uint32_t payload_bytes;  // the vendor's bytes: 4108 for HCCL, 128 for LCAL
  size_t total_bytes;      // header, the backend's own fields and the payload
};

void write_root_info_header(const RootInfoFormat& format, uint8_t* out);

// Throws NPG_INVALID_ARGUMENT naming the backend when data (size bytes) is not a root info
// of this format.
void check_root_info_header(const RootInfoFormat& format, const void* data, size_t size);

}  // namespace cann
}  // namespace npg

#endif  // NPUGATHER_CANN_ROOT_INFO_HEADER_H_
