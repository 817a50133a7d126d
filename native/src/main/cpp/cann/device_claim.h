// One communicator per device per process, whatever the backend: the spec allows one
// communicating operation per card at a time, and HCCL and LCCL create a card's
// communicators serially.
#ifndef NPUGATHER_CANN_DEVICE_CLAIM_H_
#define NPUGATHER_CANN_DEVICE_CLAIM_H_

#include <stdint.h>

#include <string>

namespace npg {
namespace cann {

// Holds device_id for this process until released or destroyed.
class DeviceClaim {
 public:
  DeviceClaim() = default;
  // Throws NPG_INVALID_USAGE naming backend, the current holder and its backend when the
  // device is taken.
  static DeviceClaim acquire(int32_t device_id, const std::string& backend, const std::string& holder);
  DeviceClaim(DeviceClaim&& other) noexcept : device_id_(other.device_id_) { other.device_id_ = -1; }
  DeviceClaim& operator=(DeviceClaim&& other) noexcept;
  DeviceClaim(const DeviceClaim&) = delete;
  DeviceClaim& operator=(const DeviceClaim&) = delete;
  ~DeviceClaim() { release(); }
  bool held() const { return device_id_ >= 0; }
  void release() noexcept;

 private:
  explicit DeviceClaim(int32_t device_id) : device_id_(device_id) {}
  int32_t device_id_ = -1;
};

}  // namespace cann
}  // namespace npg

#endif  // NPUGATHER_CANN_DEVICE_CLAIM_H_
