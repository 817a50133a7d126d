#include "cann_library.h"

#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <vector>

#include "../core/error.h"
#include "cann_errors.h"

namespace npg {
namespace hccl {
namespace {

constexpr const char* kFixHint =
    "Fix: source the CANN environment (source /usr/local/Ascend/ascend-toolkit/set_env.sh, or "
    "/usr/local/Ascend/cann/set_env.sh on newer installs), or set ASCEND_HOME_PATH to the CANN install, or set "
    "NPUGATHER_CANN_LIB_DIR to the directory that holds libascendcl.so and libhccl.so";

struct SearchDir {
  std::string dir;     // empty: plain dlopen by name (LD_LIBRARY_PATH, runpath, ld.so.cache)
  std::string origin;  // where the directory came from, for the message
};

std::string env_or_empty(const char* name) {
  const char* v = getenv(name);
  return v ? std::string(v) : std::string();
}

// The search order: explicit option, the CANN environment, the loader's own path, default installs.
std::vector<SearchDir> search_dirs() {
  std::vector<SearchDir> dirs;
  std::string explicit_dir = env_or_empty("NPUGATHER_CANN_LIB_DIR");
  if (!explicit_dir.empty()) dirs.push_back({explicit_dir, "NPUGATHER_CANN_LIB_DIR"});
  std::string home = env_or_empty("ASCEND_HOME_PATH");
  if (!home.empty()) dirs.push_back({home + "/lib64", "ASCEND_HOME_PATH"});
  std::string toolkit = env_or_empty("ASCEND_TOOLKIT_HOME");
  if (!toolkit.empty() && toolkit != home) dirs.push_back({toolkit + "/lib64", "ASCEND_TOOLKIT_HOME"});
  dirs.push_back({"", "LD_LIBRARY_PATH"});
  dirs.push_back({"/usr/local/Ascend/ascend-toolkit/latest/lib64", "default install"});
  dirs.push_back({"/usr/local/Ascend/cann/lib64", "default install"});
  return dirs;
}

struct Loaded {
  void* handle = nullptr;
  std::string path;
};

// Tries file in every directory (preferred first); appends one line per attempt to tried.
Loaded open_library(const std::string& file, const std::string& preferred_dir, std::string* tried) {
  std::vector<SearchDir> dirs = search_dirs();
  if (!preferred_dir.empty()) dirs.insert(dirs.begin(), SearchDir{preferred_dir, "next to libascendcl.so"});
  std::vector<std::string> seen;
  for (const SearchDir& d : dirs) {
    std::string path = d.dir.empty() ? file : d.dir + "/" + file;
    bool duplicate = false;
    for (const std::string& s : seen) duplicate = duplicate || s == path;
    if (duplicate) continue;
    seen.push_back(path);
    if (!d.dir.empty() && access(path.c_str(), F_OK) != 0) {
      *tried += "\n  " + path + " (" + d.origin + "): no such file";
      continue;
    }
    dlerror();
    void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL);
    if (handle != nullptr) {
      Loaded out{handle, path};
      // Name the file the loader picked (it searched by name when dir is empty).
      struct link_map* map = nullptr;
      if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
          map->l_name[0] != '\0') {
        out.path = map->l_name;
      }
      return out;
    }
    const char* err = dlerror();
    *tried += "\n  " + path + " (" + d.origin + "): " + (err ? err : "dlopen failed");
  }
  return Loaded{};
}

std::string dir_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

template <typename Fn>
void resolve(void* handle, const char* name, Fn* out) {
  *out = handle ? reinterpret_cast<Fn>(dlsym(handle, name)) : nullptr;
}

// A symbol of libhccl.so that newer CANN moved to libhcomm.so: libhccl first, then libhcomm.
template <typename Fn>
void resolve_hccl(CannApi* api, void* hccl, void** hcomm, const char* name, Fn* out) {
  resolve(hccl, name, out);
  if (*out != nullptr) return;
  if (*hcomm == nullptr && api->hcomm_path.empty()) {
    std::string ignored;
    Loaded l = open_library("libhcomm.so", dir_of(api->hccl_path), &ignored);
    *hcomm = l.handle;
    api->hcomm_path = l.handle ? l.path : "";
  }
  resolve(*hcomm, name, out);
}

void missing_symbol(const std::string& name, const std::string& where) {
  throw_error(NPG_SYSTEM_ERROR, std::string("backend hccl: required symbol ") + name + " was not found in " + where +
                                    "; this CANN installation is incomplete or too old. " + kFixHint);
}

CannApi* load() {
  CannApi api{};
  std::string tried;
  Loaded acl = open_library("libascendcl.so", "", &tried);
  if (acl.handle == nullptr) {
    throw_error(NPG_SYSTEM_ERROR, "backend hccl: cannot load libascendcl.so (the Ascend ACL runtime); tried:" +
                                      tried + "\n" + kFixHint);
  }
  api.acl_path = acl.path;
  std::string tried_hccl;
  Loaded hccl = open_library("libhccl.so", dir_of(acl.path), &tried_hccl);
  if (hccl.handle == nullptr) {
    dlclose(acl.handle);
    throw_error(NPG_SYSTEM_ERROR, "backend hccl: loaded " + acl.path +
                                      " but cannot load libhccl.so (the Ascend collective library); tried:" +
                                      tried_hccl + "\n" + kFixHint);
  }
  api.hccl_path = hccl.path;
  void* hcomm = nullptr;
  try {
    resolve(acl.handle, "aclInit", &api.aclInit);
    resolve(acl.handle, "aclrtSetDevice", &api.aclrtSetDevice);
    resolve(acl.handle, "aclrtGetDevice", &api.aclrtGetDevice);
    resolve(acl.handle, "aclrtCreateStream", &api.aclrtCreateStream);
    resolve(acl.handle, "aclrtDestroyStream", &api.aclrtDestroyStream);
    resolve(acl.handle, "aclrtSynchronizeStream", &api.aclrtSynchronizeStream);
    resolve(acl.handle, "aclrtMalloc", &api.aclrtMalloc);
    resolve(acl.handle, "aclrtFree", &api.aclrtFree);
    resolve(acl.handle, "aclrtMemcpy", &api.aclrtMemcpy);
    resolve(acl.handle, "aclrtSynchronizeStreamWithTimeout", &api.aclrtSynchronizeStreamWithTimeout);
    resolve(acl.handle, "aclGetRecentErrMsg", &api.aclGetRecentErrMsg);
    const std::pair<const char*, bool> acl_required[] = {
        {"aclInit", api.aclInit != nullptr},
        {"aclrtSetDevice", api.aclrtSetDevice != nullptr},
        {"aclrtGetDevice", api.aclrtGetDevice != nullptr},
        {"aclrtCreateStream", api.aclrtCreateStream != nullptr},
        {"aclrtDestroyStream", api.aclrtDestroyStream != nullptr},
        {"aclrtSynchronizeStream", api.aclrtSynchronizeStream != nullptr},
        {"aclrtMalloc", api.aclrtMalloc != nullptr},
        {"aclrtFree", api.aclrtFree != nullptr},
        {"aclrtMemcpy", api.aclrtMemcpy != nullptr}};
    for (const auto& s : acl_required)
      if (!s.second) missing_symbol(s.first, acl.path);

    resolve_hccl(&api, hccl.handle, &hcomm, "HcclGetRootInfo", &api.HcclGetRootInfo);
    resolve_hccl(&api, hccl.handle, &hcomm, "HcclCommInitRootInfo", &api.HcclCommInitRootInfo);
    resolve_hccl(&api, hccl.handle, &hcomm, "HcclCommInitClusterInfo", &api.HcclCommInitClusterInfo);
    resolve_hccl(&api, hccl.handle, &hcomm, "HcclCommDestroy", &api.HcclCommDestroy);
    resolve_hccl(&api, hccl.handle, &hcomm, "HcclAllGather", &api.HcclAllGather);
    resolve_hccl(&api, hccl.handle, &hcomm, "HcclAllGatherV", &api.HcclAllGatherV);
    resolve_hccl(&api, hccl.handle, &hcomm, "HcclGetErrorString", &api.HcclGetErrorString);
    std::string where = hccl.path + (api.hcomm_path.empty() ? std::string(" (no libhcomm.so found)")
                                                            : " or " + api.hcomm_path);
    const std::pair<const char*, bool> hccl_required[] = {
        {"HcclGetRootInfo", api.HcclGetRootInfo != nullptr},
        {"HcclCommInitRootInfo", api.HcclCommInitRootInfo != nullptr},
        {"HcclCommInitClusterInfo", api.HcclCommInitClusterInfo != nullptr},
        {"HcclCommDestroy", api.HcclCommDestroy != nullptr},
        {"HcclAllGather", api.HcclAllGather != nullptr}};
    for (const auto& s : hccl_required)
      if (!s.second) missing_symbol(s.first, where);
  } catch (...) {
    if (hcomm != nullptr) dlclose(hcomm);
    dlclose(hccl.handle);
    dlclose(acl.handle);
    throw;
  }
  return new CannApi(api);  // never freed: the libraries stay loaded for the process
}

std::mutex& load_mutex() {
  static std::mutex* m = new std::mutex();
  return *m;
}

CannApi* g_api = nullptr;
bool g_acl_initialized = false;

}  // namespace

const CannApi& cann_api() {
  std::lock_guard<std::mutex> lock(load_mutex());
  if (g_api == nullptr) g_api = load();
  return *g_api;
}

void ensure_acl_initialized(const CannApi& api) {
  std::lock_guard<std::mutex> lock(load_mutex());
  if (g_acl_initialized) return;
  aclError rc = api.aclInit(nullptr);
  if (rc != kAclSuccess && rc != kAclErrorRepeatInitialize) throw_acl_error(api, "aclInit", rc, "");
  g_acl_initialized = true;
}

}  // namespace hccl
}  // namespace npg
