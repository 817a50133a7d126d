// Backends register themselves by name; the API looks them up here.
#ifndef NPUGATHER_CORE_BACKEND_H_
#define NPUGATHER_CORE_BACKEND_H_

#include <stddef.h>
#include <stdint.h>

#include <memory>
#include <string>

#include "communicator.h"

namespace npg {

// Arguments of npg_comm_init after the backend-independent checks.
struct CommConfig {
  int32_t rank = 0;
  int32_t rank_size = 0;
  int32_t rank_root = 0;
  std::string comm_domain;
  int32_t comm_mode = 0;
  int32_t device_id = -1;
  std::string rank_table_file;
  int64_t timeout_ms = 0;
  uint32_t flags = 0;
  const void* root_info = nullptr;
  size_t root_info_size = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // Writes the root info into out (capacity bytes) and returns its size.
  virtual size_t get_root_info(const char* bind_address, void* out, size_t capacity) const = 0;
  virtual std::unique_ptr<Communicator> create_communicator(const CommConfig& config) const = 0;
  // Releases what get_root_info keeps for the root info until the root's init (the host
  // backend's parked listener); nothing for backends that keep nothing.
  virtual void release_root_info(const void* root_info, size_t root_info_size) const {
    (void)root_info;
    (void)root_info_size;
  }
};

using BackendFactory = std::unique_ptr<Backend> (*)();

// The backend named name ("hccl", "lccl", "host"), made on first use; throws NPG_INVALID_ARGUMENT
// listing every name for NULL or an unknown name.
const Backend& find_backend(const char* name);

}  // namespace npg

#endif  // NPUGATHER_CORE_BACKEND_H_
