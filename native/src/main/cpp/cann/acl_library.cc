#include "acl_library.h"

#include <link.h>
#include <stdlib.h>
#include <unistd.h>

#include "../core/error.h"
#include "cann_errors.h"

namespace npg {
namespace cann {

const char* const kCannFixHint =
    "Fix: source the CANN environment (source /usr/local/Ascend/ascend-toolkit/set_env.sh, or "
    "/usr/local/Ascend/cann/set_env.sh on newer installs), or set ASCEND_HOME_PATH to the CANN install, or set "
    "NPUGATHER_CANN_LIB_DIR to the directory that holds libascendcl.so and libhccl.so";

namespace {

std::string env_or_empty(const char* name) {
  const char* v = getenv(name);
  return v ? std::string(v) : std::string();
}

AclApi* load(const char* backend) {
  AclApi api{};
  std::string tried;
  LoadedLibrary acl = open_library("libascendcl.so", cann_search_dirs(), &tried);
  if (acl.handle == nullptr) {
    throw_error(NPG_SYSTEM_ERROR, std::string("backend ") + backend +
                                      ": cannot load libascendcl.so (the Ascend ACL runtime); tried:" + tried + "\n" +
                                      kCannFixHint);
  }
  api.path = acl.path;
  resolve(acl.handle, "aclInit", &api.aclInit);
  resolve(acl.handle, "aclrtSetDevice", &api.aclrtSetDevice);
  resolve(acl.handle, "aclrtGetDevice", &api.aclrtGetDevice);
  resolve(acl.handle, "aclrtCreateStream", &api.aclrtCreateStream);
  resolve(acl.handle, "aclrtDestroyStream", &api.aclrtDestroyStream);
  resolve(acl.handle, "aclrtSynchronizeStream", &api.aclrtSynchronizeStream);
  resolve(acl.handle, "aclrtMalloc", &api.aclrtMalloc);
  resolve(acl.handle, "aclrtFree", &api.aclrtFree);
  resolve(acl.handle, "aclrtMemcpy", &api.aclrtMemcpy);
  resolve(acl.handle, "aclrtResetDevice", &api.aclrtResetDevice);
  resolve(acl.handle, "aclrtSynchronizeStreamWithTimeout", &api.aclrtSynchronizeStreamWithTimeout);
  resolve(acl.handle, "aclrtStreamQuery", &api.aclrtStreamQuery);
  resolve(acl.handle, "aclrtDestroyStreamForce", &api.aclrtDestroyStreamForce);
  resolve(acl.handle, "aclrtResetDeviceForce", &api.aclrtResetDeviceForce);
  resolve(acl.handle, "aclrtGetSocName", &api.aclrtGetSocName);
  resolve(acl.handle, "aclGetRecentErrMsg", &api.aclGetRecentErrMsg);
  resolve(acl.handle, "aclrtGetMemInfo", &api.aclrtGetMemInfo);
  const char* missing = first_missing({{"aclInit", api.aclInit != nullptr},
                                       {"aclrtSetDevice", api.aclrtSetDevice != nullptr},
                                       {"aclrtGetDevice", api.aclrtGetDevice != nullptr},
                                       {"aclrtCreateStream", api.aclrtCreateStream != nullptr},
                                       {"aclrtDestroyStream", api.aclrtDestroyStream != nullptr},
                                       {"aclrtSynchronizeStream", api.aclrtSynchronizeStream != nullptr},
                                       {"aclrtMalloc", api.aclrtMalloc != nullptr},
                                       {"aclrtFree", api.aclrtFree != nullptr},
                                       {"aclrtMemcpy", api.aclrtMemcpy != nullptr},
                                       {"aclrtResetDevice", api.aclrtResetDevice != nullptr}});
  if (missing != nullptr) {
    dlclose(acl.handle);
    throw_error(NPG_SYSTEM_ERROR, std::string("backend ") + backend + ": required symbol " + missing +
                                      " was not found in " + acl.path +
                                      "; this CANN installation is incomplete or too old. " + kCannFixHint);
  }
  aclError rc = api.aclInit(nullptr);
  if (rc != kAclSuccess && rc != kAclErrorRepeatInitialize) throw_acl_error(api, "aclInit", rc, "");
  return new AclApi(api);  // never freed: the library stays loaded for the process
}

}  // namespace

std::vector<SearchDir> cann_search_dirs() {
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

LoadedLibrary open_library(const std::string& file, const std::vector<SearchDir>& dirs, std::string* tried) {
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
      LoadedLibrary out{handle, path};
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
  return LoadedLibrary{};
}

std::string dir_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

const char* first_missing(std::initializer_list<std::pair<const char*, bool>> symbols) {
  for (const auto& s : symbols)
    if (!s.second) return s.first;
  return nullptr;
}

const AclApi& acl_api(const char* backend) {
  return load_once<AclApi>([backend] { return load(backend); });
}

}  // namespace cann
}  // namespace npg
