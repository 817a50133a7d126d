#include "lccl_backend.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <fstream>
#include <random>
#include <string>

#include "../cann/device_communicator.h"
#include "../cann/root_info_header.h"
#include "../core/error.h"
#include "lcal_library.h"
#include "lccl_communicator.h"

namespace npg {
namespace lccl {
namespace {

// Our root info: the device backends' header, a random nonce (the thread-mode uid), the root
// host's boot id (LCCL is single-node: a rank on another host is refused at once), then the
// LCCL domain every multi-process rank initialises in.
//
// No LCAL unique id: in ATB, LcalGetUniqueId never writes the caller's buffer (lcal_wrap.cpp
// reinterprets the pointer argument itself as the handle), and even a filled-in id leaves the
// bootstrap's root address empty, so every rank but 0 fails ("Multi-machine is not supported",
// lcal_sock_exchange.cpp). With the zeroed id LcalCommInitRank falls back to the bootstrap of
// domain 0 on 127.0.0.1:10067, where concurrent communicators of one host collide. A domain of
// the root's choosing, different for every root info, gives every job its own port.
constexpr size_t kNonceBytes = 16;
constexpr size_t kBootIdBytes = 40;
constexpr size_t kDomainBytes = 4;  // little-endian
constexpr size_t kNonceAt = cann::kRootInfoHeaderBytes;
constexpr size_t kBootIdAt = kNonceAt + kNonceBytes;
constexpr size_t kDomainAt = kBootIdAt + kBootIdBytes;
constexpr cann::RootInfoFormat kFormat = {"lccl",
                                          {'N', 'P', 'G', 'L', 'C', 'C', 'L', '\0'},
                                          2,
                                          static_cast<uint32_t>(kDomainBytes),
                                          kDomainAt + kDomainBytes};
// The domains a root picks at random when bind_address names none: 10067 + ID stays a valid
// port. Two concurrent jobs of one host share a domain with probability 1/55000.
constexpr int kRootDomainMin = 1;
constexpr int kRootDomainMax = 55000;

struct LcclRootInfo {
  uint8_t nonce[kNonceBytes];
  std::string boot_id;
  int domain = 0;
};

// The kernel's boot id: equal on two ranks iff they run on the same host (boot).
std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  if (id.empty()) throw_error(NPG_SYSTEM_ERROR, "cannot read /proc/sys/kernel/random/boot_id");
  return id.substr(0, kBootIdBytes - 1);
}

LcclRootInfo parse_root_info(const void* data, size_t size) {
  cann::check_root_info_header(kFormat, data, size);
  const uint8_t* p = static_cast<const uint8_t*>(data);
  LcclRootInfo info;
  memcpy(info.nonce, p + kNonceAt, kNonceBytes);
  const char* boot = reinterpret_cast<const char*>(p + kBootIdAt);
  info.boot_id.assign(boot, strnlen(boot, kBootIdBytes));
  uint32_t domain = 0;
  for (size_t i = 0; i < kDomainBytes; ++i) domain |= static_cast<uint32_t>(p[kDomainAt + i]) << (8 * i);
  if (domain > static_cast<uint32_t>(kLcalMaxCommDomain)) {
    throw_error(NPG_INVALID_ARGUMENT, "root_info of backend lccl names domain " + std::to_string(domain) +
                                          ", outside [0, " + std::to_string(kLcalMaxCommDomain) + "]");
  }
  info.domain = static_cast<int>(domain);
  return info;
}

int parse_int(const std::string& text, long lo, long hi, const std::string& what, const std::string& allowed) {
  char* end = nullptr;
  errno = 0;
  long v = strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < lo || v > hi || text[0] == '+' || text[0] == '-') {
    throw_error(NPG_INVALID_ARGUMENT, what + "; allowed: " + allowed);
  }
  return static_cast<int>(v);
}

// commDomain of multi-process LCCL: "ID" or "ID:SIZE_MB", ID in [0, 65535], SIZE_MB in [200, 2043].
LcclInit parse_domain(const std::string& domain) {
  const std::string allowed = "\"ID\" or \"ID:SIZE_MB\" with ID in [0, " + std::to_string(kLcalMaxCommDomain) +
                              "] and SIZE_MB in [" + std::to_string(kLcalMinBufferMb) + ", " +
                              std::to_string(kLcalMaxBufferMb) +
                              "] (LCCL's buffer in MiB: LCAL sizes it in a 32-bit int; all-gather uses a fixed "
                              "204 MiB window of it), or \"\" for the root info's domain";
  const size_t colon = domain.find(':');
  LcclInit init;
  init.kind = LcclInit::Kind::kDomain;
  const std::string id = domain.substr(0, colon);
  init.domain = parse_int(id, 0, kLcalMaxCommDomain,
                          "comm_domain \"" + domain + "\" (ID \"" + id + "\") is not valid for backend lccl", allowed);
  if (colon != std::string::npos) {
    const std::string mb = domain.substr(colon + 1);
    init.buffer_mb =
        parse_int(mb, kLcalMinBufferMb, kLcalMaxBufferMb,
                  "comm_domain \"" + domain + "\" (SIZE_MB \"" + mb + "\") is not valid for backend lccl", allowed);
  }
  return init;
}

// bind_address of npg_get_root_info("lccl"): "", "device:N", "domain:ID" or "device:N,domain:ID".
// The device is checked and otherwise unused (the domain bootstrap needs none); the domain,
// -1 when not named, is where every rank initialises (bootstrap port 10067 + ID).
void parse_bind(const char* bind_address, std::string* device, int* domain) {
  std::string bind = bind_address ? bind_address : "";
  size_t at = 0;
  while (!bind.empty() && at <= bind.size()) {
    size_t comma = bind.find(',', at);
    std::string token = bind.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (token.compare(0, 7, "device:") == 0) {
      *device = token.substr(7);
    } else if (token.compare(0, 7, "domain:") == 0) {
      *domain = parse_int(token.substr(7), 0, kLcalMaxCommDomain,
                          "bind_address \"" + bind + "\" has domain \"" + token.substr(7) + "\"",
                          "an integer in [0, " + std::to_string(kLcalMaxCommDomain) + "]");
    } else {
      throw_error(NPG_INVALID_ARGUMENT, "bind_address \"" + bind +
                                            "\" is not valid for backend lccl: pass NULL, \"\", "
                                            "\"device:N\", \"domain:ID\" or \"device:N,domain:ID\" (LCCL's "
                                            "bootstrap listens on 127.0.0.1, port 10067 + ID)");
    }
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
}

std::string hex(const uint8_t* p, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[p[i] >> 4];
    out += kDigits[p[i] & 15];
  }
  return out;
}

class LcclBackend final : public Backend {
 public:
  size_t get_root_info(const char* bind_address, void* out, size_t capacity) const override {
    if (capacity < kFormat.total_bytes) {
      throw_error(NPG_INVALID_ARGUMENT, "capacity " + std::to_string(capacity) +
                                            " is too small: the lccl root info needs " +
                                            std::to_string(kFormat.total_bytes) + " bytes");
    }
    std::string device_text;
    int domain = -1;
    parse_bind(bind_address, &device_text, &domain);
    if (!device_text.empty()) cann::parse_device_id(device_text, "bind_address device");
    lcal_api();  // a missing ATB fails on the root, before any rank waits for it
    uint8_t* p = static_cast<uint8_t*>(out);
    memset(p, 0, kFormat.total_bytes);
    cann::write_root_info_header(kFormat, p);
    std::random_device random;
    for (size_t i = 0; i < kNonceBytes; ++i) p[kNonceAt + i] = static_cast<uint8_t>(random());
    if (domain < 0) {
      domain = std::uniform_int_distribution<int>(kRootDomainMin, kRootDomainMax)(random);
    }
    const std::string boot = boot_id();
    memcpy(p + kBootIdAt, boot.data(), boot.size());
    for (size_t i = 0; i < kDomainBytes; ++i) {
      p[kDomainAt + i] = static_cast<uint8_t>(static_cast<uint32_t>(domain) >> (8 * i));
    }
    return kFormat.total_bytes;
  }

  // Multi-process: LCCL's domain init, in comm_domain "ID[:SIZE_MB]" (root_info, when given, is
  // only checked for the node), or with comm_domain "" in the root info's domain. Multi-thread:
  // LcalCommInitThread with comm_domain as uid, or a uid made from the root info when it is "".
  std::unique_ptr<Communicator> create_communicator(const CommConfig& config) const override {
    if (config.device_id < 0) {
      throw_error(NPG_INVALID_ARGUMENT, "backend lccl needs a device id: device_id is " +
                                            std::to_string(config.device_id) +
                                            "; pass the NPU's logical id (0 <= device_id < device count)");
    }
    if (!config.rank_table_file.empty()) {
      throw_error(NPG_INVALID_ARGUMENT, "rank_table_file \"" + config.rank_table_file +
                                            "\" is for backend hccl only; backend lccl runs on one node and "
                                            "needs no rank table (pass NULL or \"\")");
    }
    if (config.rank_size > kLcalMaxRankSize) {
      throw_error(NPG_INVALID_ARGUMENT, "rank_size " + std::to_string(config.rank_size) +
                                            " is out of range for backend lccl [1, " +
                                            std::to_string(kLcalMaxRankSize) + "]");
    }
    const bool has_root = config.root_info != nullptr && config.root_info_size > 0;
    LcclRootInfo root{};
    if (has_root) {
      root = parse_root_info(config.root_info, config.root_info_size);
      const std::string mine = boot_id();
      if (root.boot_id != mine) {
        throw_error(NPG_INVALID_USAGE, "backend lccl runs on one node only: rank " + std::to_string(config.rank) +
                                           " is on another host than the root (boot id " + mine + " vs " +
                                           root.boot_id + "); use backend hccl across nodes");
      }
    }
    LcclInit init;
    if (config.comm_mode == NPG_COMM_MULTI_THREAD) {
      init.kind = LcclInit::Kind::kThread;
      if (!config.comm_domain.empty()) {
        init.uid = config.comm_domain;
        init.uid_origin = "comm_domain \"" + config.comm_domain + "\" (LCCL's thread-mode uid)";
      } else if (has_root) {
        init.uid = "npugather-" + hex(root.nonce, kNonceBytes);
        init.uid_origin = "the root info (LCCL's thread-mode uid " + init.uid + ")";
      } else {
        throw_error(NPG_INVALID_ARGUMENT,
                    "backend lccl in multi-thread mode needs a comm_domain (LCCL's uid, "
                    "the same on every rank thread) or the root's root_info");
      }
    } else if (!config.comm_domain.empty()) {
      init = parse_domain(config.comm_domain);
    } else if (has_root) {
      init.kind = LcclInit::Kind::kDomain;
      init.domain = root.domain;
    } else {
      throw_error(NPG_INVALID_ARGUMENT,
                  "root_info is NULL and comm_domain is \"\"; backend lccl in multi-process "
                  "mode needs the root's root_info or a comm_domain \"ID\" or \"ID:SIZE_MB\"");
    }
    return create_lccl_communicator(config, init);
  }
};

}  // namespace

std::unique_ptr<Backend> make_lccl_backend() { return std::unique_ptr<Backend>(new LcclBackend()); }

}  // namespace lccl
}  // namespace npg
