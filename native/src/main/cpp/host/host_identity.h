// Which ranks can share memory: same kernel boot and same namespaces.
#ifndef NPUGATHER_HOST_HOST_IDENTITY_H_
#define NPUGATHER_HOST_HOST_IDENTITY_H_

#include <string>

namespace npg {
namespace host {

constexpr size_t kMaxIdentityChars = 512;

// boot_id plus the inodes of this process's net, mnt, pid and ipc namespaces.
std::string host_identity();

}  // namespace host
}  // namespace npg

#endif  // NPUGATHER_HOST_HOST_IDENTITY_H_
