// aclError codes as npg errors, and the text every vendor error shares: the code's name,
// the vendor's text, the operation and the rank, with the npg code that says whose fault it is.
#ifndef NPUGATHER_CANN_CANN_ERRORS_H_
#define NPUGATHER_CANN_CANN_ERRORS_H_

#include <string>

#include "../core/error.h"
#include "acl_library.h"
#include "npugather.h"

namespace npg {
namespace cann {

// "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT" and so on; "ACL_ERROR_UNKNOWN" for others.
const char* acl_error_name(aclError code);
npg_result_t npg_code_of_acl(aclError code);

// The vendor part of an error: library, code, its name and the vendor's own text, followed by
// aclGetRecentErrMsg's text when that symbol exists.
VendorError vendor_error(const AclApi& api, const char* library, int64_t code, const char* code_name,
                         const std::string& own_text = "");
// Library "ACL", the code, its name and aclGetRecentErrMsg's text.
VendorError acl_vendor_error(const AclApi& api, aclError code);

// "<op> returned NAME (code) <where>: vendor text"; where is e.g. "on rank 1 (device 1)".
std::string vendor_error_text(const char* op, const VendorError& vendor, const std::string& where);
std::string acl_error_text(const AclApi& api, const char* op, aclError code, const std::string& where);

// Throws npg::Error with the text above and the vendor part.
[[noreturn]] void throw_acl_error(const AclApi& api, const char* op, aclError code, const std::string& where);

}  // namespace cann
}  // namespace npg

#endif  // NPUGATHER_CANN_CANN_ERRORS_H_
