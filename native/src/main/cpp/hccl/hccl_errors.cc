#include "hccl_errors.h"

#include "../cann/cann_errors.h"

namespace npg {
namespace hccl {

const char* hccl_result_name(HcclResult code) {
  static const char* const kNames[] = {"HCCL_SUCCESS",
                                       "HCCL_E_PARA",
                                       "HCCL_E_PTR",
                                       "HCCL_E_MEMORY",
                                       "HCCL_E_INTERNAL",
                                       "HCCL_E_NOT_SUPPORT",
                                       "HCCL_E_NOT_FOUND",
                                       "HCCL_E_UNAVAIL",
                                       "HCCL_E_SYSCALL",
                                       "HCCL_E_TIMEOUT",
                                       "HCCL_E_OPEN_FILE_FAILURE",
                                       "HCCL_E_TCP_CONNECT",
                                       "HCCL_E_ROCE_CONNECT",
                                       "HCCL_E_TCP_TRANSFER",
                                       "HCCL_E_ROCE_TRANSFER",
                                       "HCCL_E_RUNTIME",
                                       "HCCL_E_DRV",
                                       "HCCL_E_PROFILING",
                                       "HCCL_E_CCE",
                                       "HCCL_E_NETWORK",
                                       "HCCL_E_AGAIN",
                                       "HCCL_E_REMOTE",
                                       "HCCL_E_SUSPENDING",
                                       "HCCL_E_OPRETRY_FAIL",
                                       "HCCL_E_OOM"};
  if (code >= 0 && code < static_cast<int>(sizeof(kNames) / sizeof(kNames[0]))) return kNames[code];
  if (code == 1041) return "HCCL_E_IN_STATUS";
  return "HCCL_E_UNKNOWN";
}

npg_result_t npg_code_of_hccl(HcclResult code) {
  switch (code) {
    case 1:  // E_PARA
    case 2:  // E_PTR
      return NPG_INVALID_ARGUMENT;
    case 9:  // E_TIMEOUT
      return NPG_TIMEOUT;
    case 11:  // E_TCP_CONNECT
    case 12:  // E_ROCE_CONNECT
    case 13:  // E_TCP_TRANSFER
    case 14:  // E_ROCE_TRANSFER
    case 19:  // E_NETWORK
    case 21:  // E_REMOTE
    case 23:  // E_OPRETRY_FAIL: a retry after a link failure failed
      return NPG_REMOTE_ERROR;
  }
  return NPG_SYSTEM_ERROR;
}

VendorError hccl_vendor_error(const HcclApi& api, HcclResult code) {
  const char* text = api.HcclGetErrorString != nullptr ? api.HcclGetErrorString(code) : nullptr;
  return cann::vendor_error(*api.acl, "HCCL", code, hccl_result_name(code), text != nullptr ? text : "");
}

std::string hccl_error_text(const HcclApi& api, const char* op, HcclResult code, const std::string& where) {
  return cann::vendor_error_text(op, hccl_vendor_error(api, code), where);
}

void throw_hccl_error(const HcclApi& api, const char* op, HcclResult code, const std::string& where) {
  VendorError v = hccl_vendor_error(api, code);
  throw_vendor_error(npg_code_of_hccl(code), cann::vendor_error_text(op, v, where), v);
}

}  // namespace hccl
}  // namespace npg
