#include "hccl_backend.h"

#include <string.h>

#include "../core/error.h"
#include "../cann/device_communicator.h"
#include "../cann/root_info_header.h"
#include "hccl_errors.h"
#include "hccl_library.h"
#include "hccl_communicator.h"
#include "rank_table.h"

namespace npg {
namespace hccl {
namespace {

// Our root info: the device backends' header, then HCCL's 4108 bytes unchanged.
constexpr cann::RootInfoFormat kFormat = {"hccl", {'N', 'P', 'G', 'H', 'C', 'C', 'L', '\0'}, 1,
                                          static_cast<uint32_t>(kHcclRootInfoBytes),
                                          cann::kRootInfoHeaderBytes + kHcclRootInfoBytes};

HcclRootInfo parse_root_info(const void* data, size_t size) {
  if (data == nullptr) throw_error(NPG_INVALID_ARGUMENT, "root_info is NULL and no rank_table_file is given");
  cann::check_root_info_header(kFormat, data, size);
  HcclRootInfo info;
  memcpy(info.internal, static_cast<const uint8_t*>(data) + cann::kRootInfoHeaderBytes, kHcclRootInfoBytes);
  return info;
}

// npg_get_root_info has no device argument, yet HCCL wants a device set first: bind_address
// "device:N" names it (the only form backend hccl accepts there; HCCL picks its network
// interface from HCCL_IF_IP / HCCL_SOCKET_IFNAME), else cann::bind_root_device chooses. It is
// only where HCCL's root endpoint is opened from; the root rank's npg_comm_init binds its own device.
std::string root_device_text(const char* bind_address) {
  const std::string bind = bind_address ? bind_address : "";
  const std::string prefix = "device:";
  if (bind.empty()) return "";
  if (bind.compare(0, prefix.size(), prefix) != 0) {
    throw_error(NPG_INVALID_ARGUMENT, "bind_address \"" + bind +
                                          "\" is not valid for backend hccl: pass NULL, \"\" or \"device:N\" "
                                          "(the NPU to create the root info on); HCCL chooses its network "
                                          "interface from HCCL_IF_IP or HCCL_SOCKET_IFNAME");
  }
  return bind.substr(prefix.size());
}

class HcclBackend final : public Backend {
 public:
  size_t get_root_info(const char* bind_address, void* out, size_t capacity) const override {
    if (capacity < kFormat.total_bytes) {
      throw_error(NPG_INVALID_ARGUMENT, "capacity " + std::to_string(capacity) +
                                            " is too small: the hccl root info needs " +
                                            std::to_string(kFormat.total_bytes) + " bytes");
    }
    const std::string device_text = root_device_text(bind_address);
    const HcclApi& api = hccl_api();
    const int32_t device = cann::bind_root_device(*api.acl, device_text);
    const std::string where = "(device " + std::to_string(device) + ")";
    HcclRootInfo info;
    memset(&info, 0, sizeof(info));
    HcclResult hr = api.HcclGetRootInfo(&info);
    if (hr != kHcclSuccess) throw_hccl_error(api, "HcclGetRootInfo", hr, where);
    uint8_t* p = static_cast<uint8_t*>(out);
    cann::write_root_info_header(kFormat, p);
    memcpy(p + cann::kRootInfoHeaderBytes, info.internal, kHcclRootInfoBytes);
    return kFormat.total_bytes;
  }

  // comm_domain, comm_mode and the host-transport flags do not apply to HCCL and are ignored.
  std::unique_ptr<Communicator> create_communicator(const CommConfig& config) const override {
    if (config.device_id < 0) {
      throw_error(NPG_INVALID_ARGUMENT, "backend hccl needs a device id: device_id is " +
                                            std::to_string(config.device_id) +
                                            "; pass the NPU's logical id (0 <= device_id < device count)");
    }
    if (!config.rank_table_file.empty()) {
      // Checked before CANN is touched, so a bad file fails clearly even without an NPU.
      RankTableFile table = load_rank_table(config.rank_table_file, config.rank, config.rank_size);
      return create_hccl_communicator(config, nullptr, table.path);
    }
    HcclRootInfo info = parse_root_info(config.root_info, config.root_info_size);
    return create_hccl_communicator(config, &info, "");
  }
};

}  // namespace

std::unique_ptr<Backend> make_hccl_backend() { return std::unique_ptr<Backend>(new HcclBackend()); }

}  // namespace hccl
}  // namespace npg
