#include "backend.h"

#include <map>
#include <mutex>

#include "../hccl/hccl_backend.h"
#include "../host/host_backend.h"
#include "../lccl/lccl_backend.h"
#include "error.h"

namespace npg {
namespace {

// Every backend, in the order error texts list them (the Java type io.npugather.Backend declares
// the same names in the same order; its test compares them). Listed explicitly, not registered
// by static initializers, so that linking the core as a static archive can never drop one. Every
// build contains them all: the device backends open their vendor libraries with dlopen.
struct BackendEntry {
  const char* name;
  BackendFactory factory;
};
constexpr BackendEntry kBackends[] = {
    {"hccl", &hccl::make_hccl_backend}, {"lccl", &lccl::make_lccl_backend}, {"host", &host::make_host_backend}};

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::unique_ptr<Backend>> instances;
};

Registry& registry() {
  static Registry* instance = new Registry();  // never destroyed: static-init/exit order safe
  return *instance;
}

// "hccl, lccl, host"
std::string allowed_names() {
  std::string out;
  for (const BackendEntry& entry : kBackends) {
    if (!out.empty()) out += ", ";
    out += entry.name;
  }
  return out;
}

BackendFactory factory_of(const std::string& name) {
  for (const BackendEntry& entry : kBackends) {
    if (name == entry.name) return entry.factory;
  }
  return nullptr;
}

}  // namespace

const Backend& find_backend(const char* name) {
  if (name == nullptr) throw_error(NPG_INVALID_ARGUMENT, "backend is NULL; allowed values: " + allowed_names());
  std::string key(name);
  BackendFactory factory = factory_of(key);
  if (factory == nullptr) {
    throw_error(NPG_INVALID_ARGUMENT, "backend '" + key + "' is unknown; allowed values: " + allowed_names());
  }
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  auto instance = reg.instances.find(key);
  if (instance != reg.instances.end()) return *instance->second;
  auto created = factory();
  const Backend& ref = *created;
  reg.instances[key] = std::move(created);
  return ref;
}

}  // namespace npg
