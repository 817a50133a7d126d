// HcclResult and aclError codes as npg errors: the code's name, the vendor's text, the
// operation and the rank, with the npg code that says whose fault it is.
#ifndef NPUGATHER_HCCL_CANN_ERRORS_H_
#define NPUGATHER_HCCL_CANN_ERRORS_H_

#include <string>

#include "npugather.h"
#include "../core/error.h"
#include "cann_library.h"

namespace npg {
namespace hccl {

// "HCCL_E_TIMEOUT" and so on; "HCCL_E_UNKNOWN" for codes this library does not know.
const char* hccl_result_name(HcclResult code);
// "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT" and so on; "ACL_ERROR_UNKNOWN" for others.
const char* acl_error_name(aclError code);

npg_result_t npg_code_of_hccl(HcclResult code);
npg_result_t npg_code_of_acl(aclError code);

// The vendor part of an error: library, code, code name and the vendor's own text.
VendorError hccl_vendor_error(const CannApi& api, HcclResult code);
VendorError acl_vendor_error(const CannApi& api, aclError code);

// "<op> returned NAME (code) <where>: vendor text"; where is e.g. "on rank 1 (device 1)".
std::string hccl_error_text(const CannApi& api, const char* op, HcclResult code, const std::string& where);
std::string acl_error_text(const CannApi& api, const char* op, aclError code, const std::string& where);

// Throw npg::Error with the text above and the vendor part.
[[noreturn]] void throw_hccl_error(const CannApi& api, const char* op, HcclResult code, const std::string& where);
[[noreturn]] void throw_acl_error(const CannApi& api, const char* op, aclError code, const std::string& where);

}  // namespace hccl
}  // namespace npg

#endif  // NPUGATHER_HCCL_CANN_ERRORS_H_
