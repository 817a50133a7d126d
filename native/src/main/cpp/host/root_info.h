// The host backend's root info and the registry of listeners parked until init.
#ifndef NPUGATHER_HOST_ROOT_INFO_H_
#define NPUGATHER_HOST_ROOT_INFO_H_

#include <stddef.h>
#include <stdint.h>

#include <string>

#include "socket_util.h"

namespace npg {
namespace host {

constexpr size_t kIdBytes = 16;
constexpr size_t kSecretBytes = 16;
constexpr uint32_t kRootInfoVersion = 1;
// "NPGR" + version + id + secret + endpoint (family, port, 16 address bytes).
constexpr size_t kRootInfoBytes = 4 + 4 + kIdBytes + kSecretBytes + 20;

struct HostRootInfo {
  uint8_t id[kIdBytes] = {};
  uint8_t secret[kSecretBytes] = {};
  Endpoint root;

  void serialize(uint8_t* out) const;  // kRootInfoBytes
  // Throws NPG_INVALID_ARGUMENT naming root_info/root_info_size.
  static HostRootInfo parse(const void* data, size_t len);
  std::string id_hex(size_t bytes) const;
};

// Creates the id, secret and listener; parks the listener until take_parked_listener.
HostRootInfo create_root_info(const char* bind_address);

// The listener parked for info's id, or NPG_INVALID_USAGE when this process did not create it.
UniqueFd take_parked_listener(const HostRootInfo& info);

// The listener parked for info when the calling thread made it (npg_get_root_info) and it is
// still parked, else an empty fd: a rank that made the root info but is not rank_root by its
// arguments serves the bootstrap in the root's place, to tell every rank the disagreement.
UniqueFd take_listener_made_by_this_thread(const HostRootInfo& info);

// Closes the listener parked for info; false when there is none (used, expired or foreign).
bool release_parked_listener(const HostRootInfo& info);
size_t parked_listener_count();

}  // namespace host
}  // namespace npg

#endif  // NPUGATHER_HOST_ROOT_INFO_H_
