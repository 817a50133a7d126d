#include "cann_errors.h"

namespace npg {
namespace cann {

const char* acl_error_name(aclError code) {
  switch (code) {
    case 0:
      return "ACL_SUCCESS";
    case 100000:
      return "ACL_ERROR_INVALID_PARAM";
    case 100001:
      return "ACL_ERROR_UNINITIALIZE";
    case 100002:
      return "ACL_ERROR_REPEAT_INITIALIZE";
    case 100037:
      return "ACL_ERROR_REPEAT_FINALIZE";
    case 200000:
      return "ACL_ERROR_BAD_ALLOC";
    case 200002:
      return "ACL_ERROR_INVALID_DEVICE";
    case 107000:
      return "ACL_ERROR_RT_PARAM_INVALID";
    case 107001:
      return "ACL_ERROR_RT_INVALID_DEVICEID";
    case 107002:
      return "ACL_ERROR_RT_CONTEXT_NULL";
    case 107022:
      return "ACL_ERROR_RT_DEVICE_TASK_ABORT";
    case 207001:
      return "ACL_ERROR_RT_MEMORY_ALLOCATION";
    case 207004:
      return "ACL_ERROR_RT_NO_DEVICE";
    case 507000:
      return "ACL_ERROR_RT_INTERNAL_ERROR";
    case 507015:
      return "ACL_ERROR_RT_AICORE_EXCEPTION";
    case 507046:
      return "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT";
    case 507057:
      return "ACL_ERROR_RT_SUSPECT_REMOTE_ERROR";
    case 507904:
      return "ACL_ERROR_RT_COMM_OP_RETRY_FAIL";
  }
  return "ACL_ERROR_UNKNOWN";
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

VendorError vendor_error(const AclApi& api, const char* library, int64_t code, const char* code_name,
                         const std::string& own_text) {
  VendorError v;
  v.library = library;
  v.code = code;
  v.code_name = code_name;
  v.message = own_text;
  const char* recent = api.aclGetRecentErrMsg != nullptr ? api.aclGetRecentErrMsg() : nullptr;
  if (recent != nullptr && recent[0] != '\0') {
    v.message += v.message.empty() ? std::string(recent) : " [recent CANN error: " + std::string(recent) + "]";
  }
  return v;
}

VendorError acl_vendor_error(const AclApi& api, aclError code) {
  return vendor_error(api, "ACL", code, acl_error_name(code));
}

std::string vendor_error_text(const char* op, const VendorError& v, const std::string& where) {
  std::string text = std::string(op) + " returned " + v.code_name + " (" + std::to_string(v.code) + ")";
  if (!where.empty()) text += " " + where;
  if (!v.message.empty()) text += ": " + v.message;
  return text;
}

std::string acl_error_text(const AclApi& api, const char* op, aclError code, const std::string& where) {
  return vendor_error_text(op, acl_vendor_error(api, code), where);
}

void throw_acl_error(const AclApi& api, const char* op, aclError code, const std::string& where) {
  VendorError v = acl_vendor_error(api, code);
  throw_vendor_error(npg_code_of_acl(code), vendor_error_text(op, v, where), v);
}

}  // namespace cann
}  // namespace npg
