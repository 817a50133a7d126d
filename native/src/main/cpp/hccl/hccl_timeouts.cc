#include "hccl_timeouts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "../core/error.h"

namespace npg {
namespace hccl {
namespace {

constexpr int64_t kConnectTimeoutMinS = 120;
constexpr int64_t kConnectTimeoutMaxS = 7200;
constexpr int64_t kExecTimeoutMinS = 68;
constexpr int64_t kExecTimeoutMaxS = 17340;
constexpr uint32_t kDefaultConnectS = 120;
constexpr uint32_t kDefaultExecS = 1836;

std::mutex* g_mutex = new std::mutex();
bool g_latched = false;
HcclTimeouts g_timeouts;

// Adds "NAME=VALUE" entries to the environment without setenv. setenv may realloc and free
// the array that getenv in another thread is walking at that moment (rank threads, CANN
// itself and the JVM all call getenv); here the new array is complete before it is published
// with one pointer store, and the old one is never freed.
void publish_env_entries(const std::vector<std::string>& entries) {
  if (entries.empty()) return;
  size_t n = 0;
  while (environ != nullptr && environ[n] != nullptr) ++n;
  char** fresh = new char*[n + entries.size() + 1];
  for (size_t i = 0; i < n; ++i) fresh[i] = environ[i];
  for (size_t i = 0; i < entries.size(); ++i) fresh[n + i] = strdup(entries[i].c_str());
  fresh[n + entries.size()] = nullptr;
  __atomic_store_n(&environ, fresh, __ATOMIC_RELEASE);  // both arrays stay valid for readers
}

// The user's value of name, or 0 when unset; NPG_INVALID_ARGUMENT outside [lo, hi].
uint32_t user_value(const char* name, int64_t lo, int64_t hi) {
  const char* v = getenv(name);
  if (v == nullptr || v[0] == '\0') return 0;
  char* end = nullptr;
  errno = 0;
  long long s = strtoll(v, &end, 10);
  if (*end != '\0' || errno != 0 || s < lo || s > hi) {
    throw_error(NPG_INVALID_ARGUMENT, std::string(name) + "=\"" + v + "\" is outside HCCL's range [" +
                                          std::to_string(lo) + ", " + std::to_string(hi) + "] (whole seconds)");
  }
  return static_cast<uint32_t>(s);
}

std::string text(const HcclTimeouts& t) {
  return "HCCL_CONNECT_TIMEOUT=" + std::to_string(t.connect_s) + " HCCL_EXEC_TIMEOUT=" + std::to_string(t.exec_s);
}

HcclTimeouts latch_locked(const HcclTimeouts* wanted) {
  if (g_latched) return g_timeouts;
  const uint32_t user_connect = user_value("HCCL_CONNECT_TIMEOUT", kConnectTimeoutMinS, kConnectTimeoutMaxS);
  const uint32_t user_exec = user_value("HCCL_EXEC_TIMEOUT", kExecTimeoutMinS, kExecTimeoutMaxS);
  HcclTimeouts t;
  t.connect_s = user_connect != 0 ? user_connect : wanted != nullptr ? wanted->connect_s : kDefaultConnectS;
  t.exec_s = user_exec != 0 ? user_exec : wanted != nullptr ? wanted->exec_s : kDefaultExecS;
  std::vector<std::string> entries;
  if (user_connect == 0) entries.push_back("HCCL_CONNECT_TIMEOUT=" + std::to_string(t.connect_s));
  if (user_exec == 0) entries.push_back("HCCL_EXEC_TIMEOUT=" + std::to_string(t.exec_s));
  publish_env_entries(entries);
  g_timeouts = t;
  g_latched = true;
  return t;
}

}  // namespace

HcclTimeouts timeouts_for(int64_t timeout_ms) {
  const int64_t seconds = timeout_ms / 1000 + (timeout_ms % 1000 != 0);
  HcclTimeouts t;
  t.connect_s = static_cast<uint32_t>(std::min(std::max(seconds, kConnectTimeoutMinS), kConnectTimeoutMaxS));
  t.exec_s = static_cast<uint32_t>(std::min(std::max(seconds, kExecTimeoutMinS), kExecTimeoutMaxS));
  return t;
}

HcclTimeouts latch_timeouts(const HcclTimeouts* wanted) {
  std::lock_guard<std::mutex> lock(*g_mutex);
  return latch_locked(wanted);
}

void join_timeouts(const HcclTimeouts& root, const std::string& where) {
  std::lock_guard<std::mutex> lock(*g_mutex);
  const HcclTimeouts mine = latch_locked(&root);
  if (!(mine == root)) {
    throw_error(NPG_INVALID_USAGE, "HCCL timeouts differ " + where + ": this process runs with " + text(mine) +
                                       ", the root rank's with " + text(root) +
                                       "; HCCL reads them once per process, at its first HCCL call: set the same "
                                       "values on every rank, or none (the root's then apply everywhere)");
  }
}

}  // namespace hccl
}  // namespace npg
