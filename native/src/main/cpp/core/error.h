// Error type of the collective core and the thread-local last-error text.
#ifndef NPUGATHER_CORE_ERROR_H_
#define NPUGATHER_CORE_ERROR_H_

#include <stdexcept>
#include <string>

#include "npugather.h"

namespace npg {

// The only exception the core throws on purpose; the API funnel maps it to its code.
class Error : public std::runtime_error {
 public:
  Error(npg_result_t code, const std::string& text) : std::runtime_error(text), code_(code) {}
  npg_result_t code() const { return code_; }

 private:
  npg_result_t code_;
};

[[noreturn]] void throw_error(npg_result_t code, const std::string& text);
// NPG_SYSTEM_ERROR with "<what>: <strerror> (errno N)".
[[noreturn]] void throw_system_error(const std::string& what, int err);
std::string errno_text(int err);

void set_last_error(const std::string& text) noexcept;
void clear_last_error() noexcept;
const char* last_error() noexcept;

}  // namespace npg

#endif  // NPUGATHER_CORE_ERROR_H_
