#include "device_claim.h"

#include <map>
#include <mutex>

#include "../core/error.h"

namespace npg {
namespace cann {
namespace {

struct Claims {
  std::mutex mutex;
  std::map<int32_t, std::string> holders;
};

Claims& claims() {
  static Claims* instance = new Claims();  // never destroyed: exit-order safe
  return *instance;
}

}  // namespace

DeviceClaim DeviceClaim::acquire(int32_t device_id, const std::string& backend, const std::string& holder) {
  Claims& c = claims();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.holders.find(device_id);
  if (it != c.holders.end()) {
    throw_error(NPG_INVALID_USAGE, "backend " + backend + ": device " + std::to_string(device_id) +
                                       " is already used by another communicator of this process (" + it->second +
                                       "); one communicating operation per device at a time: destroy that "
                                       "communicator first or use another device id");
  }
  c.holders[device_id] = holder + ", backend " + backend;
  return DeviceClaim(device_id);
}

DeviceClaim& DeviceClaim::operator=(DeviceClaim&& other) noexcept {
  if (this != &other) {
    release();
    device_id_ = other.device_id_;
    other.device_id_ = -1;
  }
  return *this;
}

void DeviceClaim::release() noexcept {
  if (device_id_ < 0) return;
  Claims& c = claims();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.holders.erase(device_id_);
  device_id_ = -1;
}

}  // namespace cann
}  // namespace npg
