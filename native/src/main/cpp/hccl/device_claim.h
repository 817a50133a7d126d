// One communicator per device per process: HCCL runs one communicating operation per
// card at a time, and communicators on one card must be created serially.
#ifndef NPUGATHER_HCCL_DEVICE_CLAIM_H_
#define NPUGATHER_HCCL_DEVICE_CLAIM_H_

#include <stdint.h>

#include <string>

namespace npg {
namespace hccl {

// Holds device_id for this process until released or destroyed.
class DeviceClaim {
 public:
  DeviceClaim() = default;
  // Throws NPG_INVALID_USAGE naming the current holder when the device is taken.
  static DeviceClaim acquire(int32_t device_id, const std::string& holder);
  DeviceClaim(DeviceClaim&& other) noexcept : device_id_(other.device_id_) { other.device_id_ = -1; }
  DeviceClaim& operator=(DeviceClaim&& other) noexcept;
  DeviceClaim(const DeviceClaim&) = delete;
  DeviceClaim& operator=(const DeviceClaim&) = delete;
  ~DeviceClaim() { release(); }
  void release() noexcept;

 private:
  explicit DeviceClaim(int32_t device_id) : device_id_(device_id) {}
  int32_t device_id_ = -1;
};

}  // namespace hccl
}  // namespace npg

#endif  // NPUGATHER_HCCL_DEVICE_CLAIM_H_
