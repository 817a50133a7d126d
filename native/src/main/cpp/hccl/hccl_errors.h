// HcclResult codes as npg errors: the code's name, the vendor's text, the operation and the
// rank, with the npg code that says whose fault it is.
#ifndef NPUGATHER_HCCL_HCCL_ERRORS_H_
#define NPUGATHER_HCCL_HCCL_ERRORS_H_

#include <string>

#include "../core/error.h"
#include "hccl_library.h"
#include "npugather.h"

namespace npg {
namespace hccl {

// "HCCL_E_TIMEOUT" and so on; "HCCL_E_UNKNOWN" for codes this library does not know.
const char* hccl_result_name(HcclResult code);
npg_result_t npg_code_of_hccl(HcclResult code);

// Library "HCCL", the code, its name, HcclGetErrorString's and aclGetRecentErrMsg's text.
VendorError hccl_vendor_error(const HcclApi& api, HcclResult code);
std::string hccl_error_text(const HcclApi& api, const char* op, HcclResult code, const std::string& where);
[[noreturn]] void throw_hccl_error(const HcclApi& api, const char* op, HcclResult code, const std::string& where);

}  // namespace hccl
}  // namespace npg

#endif  // NPUGATHER_HCCL_HCCL_ERRORS_H_
