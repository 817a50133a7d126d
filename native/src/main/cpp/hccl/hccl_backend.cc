#include "hccl_backend.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../cann/device_communicator.h"
#include "../cann/root_info_header.h"
#include "../core/error.h"
#include "hccl_communicator.h"
#include "hccl_errors.h"
#include "hccl_library.h"
#include "hccl_timeouts.h"
#include "rank_table.h"

namespace npg {
namespace hccl {
namespace {

// Our root info: the device backends' header, the HCCL timeouts the root's process latched
// (two little-endian uint32 seconds: every rank must run with them), then HCCL's 4108 bytes.
constexpr size_t kTimeoutsAt = cann::kRootInfoHeaderBytes;
constexpr size_t kHcclInfoAt = kTimeoutsAt + 8;
constexpr cann::RootInfoFormat kFormat = {"hccl",
                                          {'N', 'P', 'G', 'H', 'C', 'C', 'L', '\0'},
                                          2,
                                          static_cast<uint32_t>(kHcclRootInfoBytes),
                                          kHcclInfoAt + kHcclRootInfoBytes};

struct RootEndpoint {
  HcclRootInfo info;
  HcclTimeouts timeouts;
};

void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

RootEndpoint parse_root_info(const void* data, size_t size) {
  if (data == nullptr) throw_error(NPG_INVALID_ARGUMENT, "root_info is NULL and no rank_table_file is given");
  cann::check_root_info_header(kFormat, data, size);
  const uint8_t* p = static_cast<const uint8_t*>(data);
  RootEndpoint root;
  root.timeouts.connect_s = get_u32(p + kTimeoutsAt);
  root.timeouts.exec_s = get_u32(p + kTimeoutsAt + 4);
  memcpy(root.info.internal, p + kHcclInfoAt, kHcclRootInfoBytes);
  return root;
}

// npg_get_root_info has no device argument, yet HCCL wants a device set first: bind_address
// "device:N" names it, else cann::bind_root_device chooses. It is only where HCCL's root
// endpoint is opened from; the root rank's npg_comm_init binds its own device. HCCL picks its
// network interface from HCCL_IF_IP / HCCL_SOCKET_IFNAME.
// "timeout_ms:T" (alone or after "device:N,") is the communicator timeout the HCCL timeouts are
// derived from: HcclGetRootInfo is the root process's first HCCL call, where HCCL reads them.
struct RootBind {
  std::string device_text;
  int64_t timeout_ms = -1;  // not given
};

// T of "timeout_ms:T", or -1 when it is not a positive integer.
int64_t positive_ms(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long long v = strtoll(text.c_str(), &end, 10);
  return !text.empty() && *end == '\0' && errno == 0 && v > 0 ? v : -1;
}

RootBind parse_bind(const char* bind_address) {
  const std::string bind = bind_address ? bind_address : "";
  RootBind out;
  size_t at = 0;
  while (!bind.empty() && at <= bind.size()) {
    const size_t comma = bind.find(',', at);
    const std::string token = bind.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    bool valid = false;
    if (token.compare(0, 7, "device:") == 0) {
      out.device_text = token.substr(7);
      valid = true;
    } else if (token.compare(0, 11, "timeout_ms:") == 0) {
      out.timeout_ms = positive_ms(token.substr(11));
      valid = out.timeout_ms > 0;
    }
    if (!valid) {
      throw_error(NPG_INVALID_ARGUMENT, "bind_address \"" + bind +
                                            "\" is not valid for backend hccl: pass NULL, \"\", \"device:N\" (the "
                                            "NPU to create the root info on), \"timeout_ms:T\" (T > 0, the "
                                            "communicator timeout) or \"device:N,timeout_ms:T\"; HCCL chooses its "
                                            "network interface from HCCL_IF_IP or HCCL_SOCKET_IFNAME");
    }
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

class HcclBackend final : public Backend {
 public:
  size_t get_root_info(const char* bind_address, void* out, size_t capacity) const override {
    if (capacity < kFormat.total_bytes) {
      throw_error(NPG_INVALID_ARGUMENT, "capacity " + std::to_string(capacity) +
                                            " is too small: the hccl root info needs " +
                                            std::to_string(kFormat.total_bytes) + " bytes");
    }
    const RootBind bind = parse_bind(bind_address);
    const HcclApi& api = hccl_api();
    const int32_t device = cann::bind_root_device(*api.acl, bind.device_text);
    const HcclTimeouts wanted = timeouts_for(bind.timeout_ms);
    const HcclTimeouts latched = latch_timeouts(bind.timeout_ms > 0 ? &wanted : nullptr);
    const std::string where = "(device " + std::to_string(device) + ")";
    HcclRootInfo info;
    memset(&info, 0, sizeof(info));
    HcclResult hr = api.HcclGetRootInfo(&info);
    if (hr != kHcclSuccess) throw_hccl_error(api, "HcclGetRootInfo", hr, where);
    uint8_t* p = static_cast<uint8_t*>(out);
    cann::write_root_info_header(kFormat, p);
    put_u32(p + kTimeoutsAt, latched.connect_s);
    put_u32(p + kTimeoutsAt + 4, latched.exec_s);
    memcpy(p + kHcclInfoAt, info.internal, kHcclRootInfoBytes);
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
      check_rank_device(table, config.rank, config.device_id);
      return create_hccl_communicator(config, nullptr, HcclTimeouts{}, table.path);
    }
    const RootEndpoint root = parse_root_info(config.root_info, config.root_info_size);
    return create_hccl_communicator(config, &root.info, root.timeouts, "");
  }
};

}  // namespace

std::unique_ptr<Backend> make_hccl_backend() { return std::unique_ptr<Backend>(new HcclBackend()); }

}  // namespace hccl
}  // namespace npg
