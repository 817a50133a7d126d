#include "hccl_library.h"

#include <string>
#include <vector>

#include "../core/error.h"

namespace npg {
namespace hccl {
namespace {

using cann::LoadedLibrary;
using cann::SearchDir;

// The CANN search order, with the directory of libascendcl.so first.
std::vector<SearchDir> dirs_next_to(const std::string& acl_path) {
  std::vector<SearchDir> dirs = cann::cann_search_dirs();
  dirs.insert(dirs.begin(), SearchDir{cann::dir_of(acl_path), "next to libascendcl.so"});
  return dirs;
}

// A symbol of libhccl.so that newer CANN moved to libhcomm.so: libhccl first, then libhcomm.
template <typename Fn>
void resolve_hccl(HcclApi* api, void* hccl, void** hcomm, const char* name, Fn* out) {
  cann::resolve(hccl, name, out);
  if (*out != nullptr) return;
  if (*hcomm == nullptr && api->hcomm_path.empty()) {
    std::string ignored;
    LoadedLibrary l = cann::open_library("libhcomm.so", dirs_next_to(api->hccl_path), &ignored);
    *hcomm = l.handle;
    api->hcomm_path = l.handle ? l.path : "";
  }
  cann::resolve(*hcomm, name, out);
}

HcclApi* load() {
  HcclApi api{};
  api.acl = &cann::acl_api("hccl");
  std::string tried;
  LoadedLibrary hccl = cann::open_library("libhccl.so", dirs_next_to(api.acl->path), &tried);
  if (hccl.handle == nullptr) {
    throw_error(NPG_SYSTEM_ERROR, "backend hccl: loaded " + api.acl->path +
                                      " but cannot load libhccl.so (the Ascend collective library); tried:" + tried +
                                      "\n" + cann::kCannFixHint);
  }
  api.hccl_path = hccl.path;
  void* hcomm = nullptr;
  resolve_hccl(&api, hccl.handle, &hcomm, "HcclGetRootInfo", &api.HcclGetRootInfo);
  resolve_hccl(&api, hccl.handle, &hcomm, "HcclCommInitRootInfo", &api.HcclCommInitRootInfo);
  resolve_hccl(&api, hccl.handle, &hcomm, "HcclCommInitClusterInfo", &api.HcclCommInitClusterInfo);
  resolve_hccl(&api, hccl.handle, &hcomm, "HcclCommDestroy", &api.HcclCommDestroy);
  resolve_hccl(&api, hccl.handle, &hcomm, "HcclAllGather", &api.HcclAllGather);
  resolve_hccl(&api, hccl.handle, &hcomm, "HcclAllGatherV", &api.HcclAllGatherV);
  resolve_hccl(&api, hccl.handle, &hcomm, "HcclGetErrorString", &api.HcclGetErrorString);
  const std::string where =
      hccl.path + (api.hcomm_path.empty() ? std::string(" (no libhcomm.so found)") : " or " + api.hcomm_path);
  const char* missing = cann::first_missing({{"HcclGetRootInfo", api.HcclGetRootInfo != nullptr},
                                             {"HcclCommInitRootInfo", api.HcclCommInitRootInfo != nullptr},
                                             {"HcclCommInitClusterInfo", api.HcclCommInitClusterInfo != nullptr},
                                             {"HcclCommDestroy", api.HcclCommDestroy != nullptr},
                                             {"HcclAllGather", api.HcclAllGather != nullptr}});
  if (missing != nullptr) {
    if (hcomm != nullptr) dlclose(hcomm);
    dlclose(hccl.handle);
    throw_error(NPG_SYSTEM_ERROR, std::string("backend hccl: required symbol ") + missing + " was not found in " +
                                      where + "; this CANN installation is incomplete or too old. " +
                                      cann::kCannFixHint);
  }
  return new HcclApi(api);  // never freed: the libraries stay loaded for the process
}

}  // namespace

const HcclApi& hccl_api() { return cann::load_once<HcclApi>(load); }

}  // namespace hccl
}  // namespace npg
