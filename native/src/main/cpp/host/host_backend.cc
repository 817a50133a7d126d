// Backend "host": the CPU collective of this library.
#include "host_backend.h"

#include <string.h>

#include "../core/backend.h"
#include "../core/error.h"
#include "host_communicator.h"
#include "root_info.h"

namespace npg {
namespace host {
namespace {

class HostBackend final : public Backend {
 public:
  size_t get_root_info(const char* bind_address, void* out, size_t capacity) const override {
    if (capacity < kRootInfoBytes) {
      throw_error(NPG_INVALID_ARGUMENT, "capacity " + std::to_string(capacity) +
                                            " is too small: the host root info "
                                            "needs " +
                                            std::to_string(kRootInfoBytes) + " bytes");
    }
    HostRootInfo info = create_root_info(bind_address);
    info.serialize(static_cast<uint8_t*>(out));
    return kRootInfoBytes;
  }

  std::unique_ptr<Communicator> create_communicator(const CommConfig& config) const override {
    return HostCommunicator::create(config);
  }

  void release_root_info(const void* root_info, size_t root_info_size) const override {
    release_parked_listener(HostRootInfo::parse(root_info, root_info_size));
  }
};

}  // namespace

std::unique_ptr<Backend> make_host_backend() { return std::unique_ptr<Backend>(new HostBackend()); }
}  // namespace host
}  // namespace npg
