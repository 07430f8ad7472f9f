#include "base/status.h"

#include <cstdarg>
#include <cstdlib>
#include <vector>

namespace strata {

void assert_fail(const char* expr, const char* file, int line, const char* msg) {
  std::fprintf(stderr, "strata: assertion failed at %s:%d: %s%s%s\n", file, line, expr, msg ? " — " : "",
               msg ? msg : "");
  std::fflush(stderr);
  std::abort();
}

Error err(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string s(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(s.data(), s.size() + 1, fmt, ap2);
  va_end(ap2);
  return Error{std::move(s)};
}

Error err_context(const std::string& ctx, const Error& inner) {
  return Error{ctx + ": " + inner.message};
}

}  // namespace strata
