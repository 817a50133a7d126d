#include "root_info.h"

#include <string.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>

#include "../core/error.h"
#include "wire.h"

namespace npg {
namespace host {
namespace {

constexpr uint8_t kRootInfoMagic[4] = {'N', 'P', 'G', 'R'};
constexpr auto kParkedListenerLifetime = std::chrono::minutes(10);

struct ParkedListener {
  UniqueFd fd;
  uint8_t secret[kSecretBytes];
  std::chrono::steady_clock::time_point created;
  uint64_t maker = 0;  // this_thread_token() of the thread that made the root info
};

struct ListenerRegistry {
  std::mutex mutex;
  std::map<std::string, ParkedListener> parked;  // key: id as hex
};

ListenerRegistry& listener_registry() {
  static ListenerRegistry* instance = new ListenerRegistry();  // lives until exit; fds close with the process
  return *instance;
}

// A number for the calling thread, never reused (a thread id may be, once its thread ended).
uint64_t this_thread_token() {
  static std::atomic<uint64_t> next{1};
  thread_local const uint64_t token = next.fetch_add(1);
  return token;
}

// Closes the listeners parked for longer than their lifetime; the caller holds the mutex.
void sweep_expired(ListenerRegistry& reg) {
  auto now = std::chrono::steady_clock::now();
  for (auto it = reg.parked.begin(); it != reg.parked.end();) {
    it = now - it->second.created > kParkedListenerLifetime ? reg.parked.erase(it) : std::next(it);
  }
}

}  // namespace

void HostRootInfo::serialize(uint8_t* out) const {
  ByteWriter w;
  w.bytes(kRootInfoMagic, 4);
  w.u32(kRootInfoVersion);
  w.bytes(id, kIdBytes);
  w.bytes(secret, kSecretBytes);
  w.endpoint(root);
  memcpy(out, w.data().data(), kRootInfoBytes);
}

HostRootInfo HostRootInfo::parse(const void* data, size_t len) {
  if (data == nullptr) throw_error(NPG_INVALID_ARGUMENT, "root_info is NULL");
  if (len != kRootInfoBytes) {
    throw_error(NPG_INVALID_ARGUMENT, "root_info_size " + std::to_string(len) +
                                          " is not the size of a host root info (" + std::to_string(kRootInfoBytes) +
                                          " bytes)");
  }
  const auto* p = static_cast<const uint8_t*>(data);
  if (memcmp(p, kRootInfoMagic, 4) != 0) {
    throw_error(NPG_INVALID_ARGUMENT,
                "root_info is not a host root info (bad magic); was it made by "
                "npg_get_root_info(\"host\", ...)?");
  }
  HostRootInfo info;
  try {
    ByteReader r(p + 4, len - 4);
    uint32_t version = r.u32();
    if (version != kRootInfoVersion) {
      throw_error(NPG_INVALID_ARGUMENT, "root_info has version " + std::to_string(version) + ", expected " +
                                            std::to_string(kRootInfoVersion));
    }
    r.bytes(info.id, kIdBytes);
    r.bytes(info.secret, kSecretBytes);
    info.root = r.endpoint();
    r.expect_end();
  } catch (const Error& e) {
    if (e.code() == NPG_INVALID_ARGUMENT) throw;
    throw_error(NPG_INVALID_ARGUMENT, std::string("root_info is malformed: ") + e.what());
  }
  if (info.root.port == 0) throw_error(NPG_INVALID_ARGUMENT, "root_info names port 0");
  return info;
}

std::string HostRootInfo::id_hex(size_t bytes) const {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes && i < kIdBytes; ++i) {
    out += kHex[id[i] >> 4];
    out += kHex[id[i] & 15];
  }
  return out;
}

HostRootInfo create_root_info(const char* bind_address) {
  HostRootInfo info;
  fill_random(info.id, kIdBytes);
  fill_random(info.secret, kSecretBytes);
  Endpoint bind = choose_bind_address(bind_address);
  UniqueFd fd = listen_on(bind, &info.root);
  ListenerRegistry& reg = listener_registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  sweep_expired(reg);
  ParkedListener& slot = reg.parked[info.id_hex(kIdBytes)];
  slot.fd = std::move(fd);
  memcpy(slot.secret, info.secret, kSecretBytes);
  slot.created = std::chrono::steady_clock::now();
  slot.maker = this_thread_token();
  return info;
}

UniqueFd take_parked_listener(const HostRootInfo& info) {
  ListenerRegistry& reg = listener_registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  sweep_expired(reg);
  auto it = reg.parked.find(info.id_hex(kIdBytes));
  if (it == reg.parked.end() || !constant_time_equal(it->second.secret, info.secret, kSecretBytes)) {
    throw_error(NPG_INVALID_USAGE,
                "this rank is rank_root but root_info was not created in this process by npg_get_root_info "
                "(or was already used by an earlier npg_comm_init, or expired after 10 minutes); the root "
                "rank must call npg_get_root_info itself");
  }
  UniqueFd fd = std::move(it->second.fd);
  reg.parked.erase(it);
  return fd;
}

UniqueFd take_listener_made_by_this_thread(const HostRootInfo& info) {
  ListenerRegistry& reg = listener_registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  sweep_expired(reg);
  auto it = reg.parked.find(info.id_hex(kIdBytes));
  if (it == reg.parked.end() || it->second.maker != this_thread_token() ||
      !constant_time_equal(it->second.secret, info.secret, kSecretBytes)) {
    return UniqueFd();
  }
  UniqueFd fd = std::move(it->second.fd);
  reg.parked.erase(it);
  return fd;
}

bool release_parked_listener(const HostRootInfo& info) {
  ListenerRegistry& reg = listener_registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  sweep_expired(reg);
  auto it = reg.parked.find(info.id_hex(kIdBytes));
  if (it == reg.parked.end() || !constant_time_equal(it->second.secret, info.secret, kSecretBytes)) return false;
  reg.parked.erase(it);
  return true;
}

size_t parked_listener_count() {
  ListenerRegistry& reg = listener_registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  sweep_expired(reg);
  return reg.parked.size();
}

}  // namespace host
}  // namespace npg
