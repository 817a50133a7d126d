#include "error.h"

#include <string.h>

namespace npg {
namespace {

thread_local std::string tls_last_error;
thread_local VendorError tls_last_vendor_error;

}  // namespace

void throw_error(npg_result_t code, const std::string& text) { throw Error(code, text); }

void throw_vendor_error(npg_result_t code, const std::string& text, const VendorError& vendor) {
  throw Error(code, text, vendor);
}

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r returns the message, which may not live in buf.
  const char* msg = strerror_r(err, buf, sizeof(buf));
  return std::string(msg) + " (errno " + std::to_string(err) + ")";
}

void throw_system_error(const std::string& what, int err) {
  throw Error(NPG_SYSTEM_ERROR, what + ": " + errno_text(err));
}

void set_last_error(const std::string& text, const VendorError& vendor) noexcept {
  try {
    tls_last_error = text;
    tls_last_vendor_error = vendor;
  } catch (...) {
    tls_last_error.clear();
    tls_last_vendor_error = VendorError();
  }
}

void clear_last_error() noexcept {
  tls_last_error.clear();
  tls_last_vendor_error = VendorError();
}

const char* last_error() noexcept { return tls_last_error.c_str(); }

const VendorError& last_vendor_error() noexcept { return tls_last_vendor_error; }

}  // namespace npg
