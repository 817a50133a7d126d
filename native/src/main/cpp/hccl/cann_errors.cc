#include "cann_errors.h"

#include "../core/error.h"

namespace npg {
namespace hccl {

const char* hccl_result_name(HcclResult code) {
  static const char* const kNames[] = {
      "HCCL_SUCCESS",        "HCCL_E_PARA",           "HCCL_E_PTR",           "HCCL_E_MEMORY",
      "HCCL_E_INTERNAL",     "HCCL_E_NOT_SUPPORT",    "HCCL_E_NOT_FOUND",     "HCCL_E_UNAVAIL",
      "HCCL_E_SYSCALL",      "HCCL_E_TIMEOUT",        "HCCL_E_OPEN_FILE_FAILURE", "HCCL_E_TCP_CONNECT",
      "HCCL_E_ROCE_CONNECT", "HCCL_E_TCP_TRANSFER",   "HCCL_E_ROCE_TRANSFER", "HCCL_E_RUNTIME",
      "HCCL_E_DRV",          "HCCL_E_PROFILING",      "HCCL_E_CCE",           "HCCL_E_NETWORK",
      "HCCL_E_AGAIN",        "HCCL_E_REMOTE",         "HCCL_E_SUSPENDING",    "HCCL_E_OPRETRY_FAIL",
      "HCCL_E_OOM"};
  if (code >= 0 && code < static_cast<int>(sizeof(kNames) / sizeof(kNames[0]))) return kNames[code];
  if (code == 1041) return "HCCL_E_IN_STATUS";
  return "HCCL_E_UNKNOWN";
}

const char* acl_error_name(aclError code) {
  switch (code) {
    case 0: return "ACL_SUCCESS";
    case 100000: return "ACL_ERROR_INVALID_PARAM";
    case 100001: return "ACL_ERROR_UNINITIALIZE";
    case 100002: return "ACL_ERROR_REPEAT_INITIALIZE";
    case 100037: return "ACL_ERROR_REPEAT_FINALIZE";
    case 200000: return "ACL_ERROR_BAD_ALLOC";
    case 200002: return "ACL_ERROR_INVALID_DEVICE";
    case 107000: return "ACL_ERROR_RT_PARAM_INVALID";
    case 107001: return "ACL_ERROR_RT_INVALID_DEVICEID";
    case 107002: return "ACL_ERROR_RT_CONTEXT_NULL";
    case 107022: return "ACL_ERROR_RT_DEVICE_TASK_ABORT";
    case 207001: return "ACL_ERROR_RT_MEMORY_ALLOCATION";
    case 207004: return "ACL_ERROR_RT_NO_DEVICE";
    case 507000: return "ACL_ERROR_RT_INTERNAL_ERROR";
    case 507015: return "ACL_ERROR_RT_AICORE_EXCEPTION";
    case 507046: return "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT";
    case 507057: return "ACL_ERROR_RT_SUSPECT_REMOTE_ERROR";
    case 507904: return "ACL_ERROR_RT_COMM_OP_RETRY_FAIL";
  }
  return "ACL_ERROR_UNKNOWN";
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

npg_result_t npg_code_of_acl(aclError code) {
  switch (code) {
    case 100000:  // INVALID_PARAM
    case 107000:  // RT_PARAM_INVALID
    case 107001:  // RT_INVALID_DEVICEID
    case 200002:  // INVALID_DEVICE
      return NPG_INVALID_ARGUMENT;
    case 507046:  // RT_STREAM_SYNC_TIMEOUT
      return NPG_TIMEOUT;
    case 507057:  // RT_SUSPECT_REMOTE_ERROR
    case 507904:  // RT_COMM_OP_RETRY_FAIL
      return NPG_REMOTE_ERROR;
  }
  return NPG_SYSTEM_ERROR;
}

namespace {

std::string with_where(const std::string& text, const std::string& where) {
  return where.empty() ? text : text + " " + where;
}

}  // namespace

VendorError hccl_vendor_error(const CannApi& api, HcclResult code) {
  VendorError v;
  v.library = "HCCL";
  v.code = code;
  v.code_name = hccl_result_name(code);
  if (api.HcclGetErrorString != nullptr) {
    const char* text = api.HcclGetErrorString(code);
    if (text != nullptr) v.message = text;
  }
  if (api.aclGetRecentErrMsg != nullptr) {
    const char* recent = api.aclGetRecentErrMsg();
    if (recent != nullptr && recent[0] != '\0') {
      v.message += (v.message.empty() ? "" : " [recent CANN error: ") + std::string(recent) +
                   (v.message.empty() ? "" : "]");
    }
  }
  return v;
}

VendorError acl_vendor_error(const CannApi& api, aclError code) {
  VendorError v;
  v.library = "ACL";
  v.code = code;
  v.code_name = acl_error_name(code);
  if (api.aclGetRecentErrMsg != nullptr) {
    const char* recent = api.aclGetRecentErrMsg();
    if (recent != nullptr) v.message = recent;
  }
  return v;
}

std::string vendor_error_text(const char* op, const VendorError& v, const std::string& where) {
  std::string text = with_where(std::string(op) + " returned " + v.code_name + " (" + std::to_string(v.code) + ")",
                                where);
  if (!v.message.empty()) text += ": " + v.message;
  return text;
}

std::string hccl_error_text(const CannApi& api, const char* op, HcclResult code, const std::string& where) {
  return vendor_error_text(op, hccl_vendor_error(api, code), where);
}

std::string acl_error_text(const CannApi& api, const char* op, aclError code, const std::string& where) {
  return vendor_error_text(op, acl_vendor_error(api, code), where);
}

void throw_hccl_error(const CannApi& api, const char* op, HcclResult code, const std::string& where) {
  VendorError v = hccl_vendor_error(api, code);
  throw_vendor_error(npg_code_of_hccl(code), vendor_error_text(op, v, where), v);
}

void throw_acl_error(const CannApi& api, const char* op, aclError code, const std::string& where) {
  VendorError v = acl_vendor_error(api, code);
  throw_vendor_error(npg_code_of_acl(code), vendor_error_text(op, v, where), v);
}

}  // namespace hccl
}  // namespace npg
