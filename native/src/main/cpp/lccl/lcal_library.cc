#include "lcal_library.h"

#include <stdlib.h>

#include <vector>

#include "../cann/cann_errors.h"

namespace npg {
namespace lccl {
namespace {

constexpr const char* kLcalFixHint =
    "Fix: source the ATB environment (source /usr/local/Ascend/nnal/atb/set_env.sh, which sets ATB_HOME_PATH), "
    "or set NPUGATHER_CANN_LIB_DIR to the directory that holds liblcal.so; backend hccl needs no ATB";

std::vector<cann::SearchDir> lcal_search_dirs() {
  std::vector<cann::SearchDir> dirs;
  const char* explicit_dir = getenv("NPUGATHER_CANN_LIB_DIR");
  if (explicit_dir != nullptr && explicit_dir[0] != '\0') dirs.push_back({explicit_dir, "NPUGATHER_CANN_LIB_DIR"});
  const char* atb = getenv("ATB_HOME_PATH");
  if (atb != nullptr && atb[0] != '\0') dirs.push_back({std::string(atb) + "/lib", "ATB_HOME_PATH"});
  dirs.push_back({"", "LD_LIBRARY_PATH"});
  dirs.push_back({"/usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_1/lib", "default install"});
  dirs.push_back({"/usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_0/lib", "default install"});
  return dirs;
}

LcalApi* load() {
  LcalApi api{};
  api.acl = &cann::acl_api("lccl");
  std::string tried;
  cann::LoadedLibrary lcal = cann::open_library("liblcal.so", lcal_search_dirs(), &tried);
  if (lcal.handle == nullptr) {
    throw_error(NPG_SYSTEM_ERROR, "backend lccl: loaded " + api.acl->path +
                                      " but cannot load liblcal.so (LCCL, part of ATB/NNAL); tried:" + tried + "\n" +
                                      kLcalFixHint);
  }
  api.path = lcal.path;
  cann::resolve(lcal.handle, "LcalCommInitThread", &api.LcalCommInitThread);
  cann::resolve(lcal.handle, "LcclAllGather", &api.LcclAllGather);
  cann::resolve(lcal.handle, "LcclCommDestroy", &api.LcclCommDestroy);
  cann::resolve(lcal.handle, "LcalCommInitRankWithCustDomainSize", &api.LcalCommInitRankWithCustDomainSize);
  cann::resolve(lcal.handle, "LcalCommInitRankWithDomain", &api.LcalCommInitRankWithDomain);
  const char* missing = cann::first_missing({{"LcalCommInitRankWithDomain", api.LcalCommInitRankWithDomain != nullptr},
                                             {"LcalCommInitThread", api.LcalCommInitThread != nullptr},
                                             {"LcclAllGather", api.LcclAllGather != nullptr},
                                             {"LcclCommDestroy", api.LcclCommDestroy != nullptr}});
  if (missing != nullptr) {
    dlclose(lcal.handle);
    throw_error(NPG_SYSTEM_ERROR, std::string("backend lccl: required symbol ") + missing + " was not found in " +
                                      lcal.path + "; this ATB installation is incomplete or too old. " + kLcalFixHint);
  }
  return new LcalApi(api);  // never freed: the library stays loaded for the process
}

}  // namespace

const LcalApi& lcal_api() { return cann::load_once<LcalApi>(load); }

const char* lcal_result_name(int code) {
  switch (code) {
    case 0:
      return "LCAL_SUCCESS";
    case -1:
      return "LCAL_ERROR_NOT_INITIALIZED";
    case -2:
      return "LCAL_ERROR_MKIRT";
    case -3:
      return "LCAL_ERROR_PARA_CHECK_FAIL";
    case -4:
      return "LCAL_ERROR_INTERNAL";
    case -5:
      return "LCAL_ERROR_TIMEOUT";
    case -6:
      return "LCAL_ERROR_OUT_OF_MEMORY";
    case -7:
      return "LCAL_ERROR_NOT_FOUND";
  }
  return "LCAL_ERROR_UNKNOWN";
}

npg_result_t npg_code_of_lcal(int code) {
  switch (code) {
    case -3:
      return NPG_INVALID_ARGUMENT;
    case -5:
      return NPG_TIMEOUT;
  }
  return NPG_SYSTEM_ERROR;
}

VendorError lcal_vendor_error(const LcalApi& api, int code) {
  return cann::vendor_error(*api.acl, "LCAL", code, lcal_result_name(code));
}

void throw_lcal_error(const LcalApi& api, const char* op, int code, const std::string& where) {
  VendorError v = lcal_vendor_error(api, code);
  throw_vendor_error(npg_code_of_lcal(code), cann::vendor_error_text(op, v, where), v);
}

}  // namespace lccl
}  // namespace npg
