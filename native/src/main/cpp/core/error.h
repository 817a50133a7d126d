// Error type of the collective core and the thread-local last-error text.
#ifndef NPUGATHER_CORE_ERROR_H_
#define NPUGATHER_CORE_ERROR_H_

#include <stdint.h>

#include <stdexcept>
#include <string>

#include "npugather.h"

namespace npg {

// The vendor library's own verdict behind an error (HcclResult, aclError, LCAL code).
struct VendorError {
  std::string library;  // "HCCL", "ACL", "LCAL"; empty: the error has no vendor part
  int64_t code = 0;
  std::string code_name;  // "HCCL_E_TIMEOUT" and so on
  std::string message;    // the vendor's own text (HcclGetErrorString, aclGetRecentErrMsg), may be empty
  int32_t rank = -1;      // the reporting rank, -1 when unknown
};

// The only exception the core throws on purpose; the API funnel maps it to its code.
class Error : public std::runtime_error {
 public:
  Error(npg_result_t code, const std::string& text) : std::runtime_error(text), code_(code) {}
  Error(npg_result_t code, const std::string& text, VendorError vendor)
      : std::runtime_error(text), code_(code), vendor_(std::move(vendor)) {}
  npg_result_t code() const { return code_; }
  const VendorError& vendor() const { return vendor_; }

 private:
  npg_result_t code_;
  VendorError vendor_;
};

[[noreturn]] void throw_error(npg_result_t code, const std::string& text);
[[noreturn]] void throw_vendor_error(npg_result_t code, const std::string& text, const VendorError& vendor);
// NPG_SYSTEM_ERROR with "<what>: <strerror> (errno N)".
[[noreturn]] void throw_system_error(const std::string& what, int err);
std::string errno_text(int err);

// The last error of the calling thread: its text and its vendor part (library empty when none).
void set_last_error(const std::string& text, const VendorError& vendor = VendorError()) noexcept;
void clear_last_error() noexcept;
const char* last_error() noexcept;
const VendorError& last_vendor_error() noexcept;

}  // namespace npg

#endif  // NPUGATHER_CORE_ERROR_H_
