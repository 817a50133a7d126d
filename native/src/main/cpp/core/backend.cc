#include "backend.h"

#include <map>
#include <mutex>

#include "error.h"
#include "../hccl/hccl_backend.h"
#include "../host/host_backend.h"
#include "../lccl/lccl_backend.h"

namespace npg {
namespace {

// Every backend name the ABI knows, whether or not this build contains it.
constexpr const char* kKnownBackends[] = {"hccl", "lccl", "host"};

// The backends this build contains. Listed explicitly (not by static initializers) so that
// linking the core as a static archive can never drop one.
struct BackendEntry {
  const char* name;
  BackendFactory factory;
};
constexpr BackendEntry kBuiltBackends[] = {{"host", &host::make_host_backend},
                                           {"hccl", &hccl::make_hccl_backend},
                                           {"lccl", &lccl::make_lccl_backend}};

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::unique_ptr<Backend>> instances;
};

Registry& registry() {
  static Registry* instance = new Registry();  // never destroyed: static-init/exit order safe
  return *instance;
}

std::string available_list() {
  std::string out;
  for (const BackendEntry& entry : kBuiltBackends) {
    if (!out.empty()) out += ", ";
    out += "'" + std::string(entry.name) + "'";
  }
  return out;
}

BackendFactory built_factory(const std::string& name) {
  for (const BackendEntry& entry : kBuiltBackends) {
    if (name == entry.name) return entry.factory;
  }
  return nullptr;
}

}  // namespace

const Backend& find_backend(const char* name) {
  if (name == nullptr) throw_error(NPG_INVALID_ARGUMENT, "backend is NULL; allowed values: hccl, lccl, host");
  std::string key(name);
  bool known = false;
  for (const char* k : kKnownBackends) known = known || key == k;
  if (!known) {
    throw_error(NPG_INVALID_ARGUMENT,
                "backend '" + key + "' is unknown; allowed values: hccl, lccl, host");
  }
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  auto instance = reg.instances.find(key);
  if (instance != reg.instances.end()) return *instance->second;
  BackendFactory factory = built_factory(key);
  if (factory == nullptr) {
    throw_error(NPG_INVALID_USAGE, "backend '" + key +
                                       "' is not available in this build of the native library; use backend " +
                                       available_list());
  }
  auto created = factory();
  const Backend& ref = *created;
  reg.instances[key] = std::move(created);
  return ref;
}

}  // namespace npg
