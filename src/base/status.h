// Errors are values across module boundaries (docs/design.md, principle 8).
//   Status      — ok, or an error message that names the problem.
//   Result<T>   — a T, or an error message.
// STRATA_TRY(expr) returns early from a function returning Status/Result<U> when expr failed.
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <variant>

#include "base/assert.h"

namespace strata {

struct Error {
  std::string message;
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error e) : err_(std::move(e.message)), failed_(true) {}  // NOLINT: implicit by design
  static Status ok_status() { return Status(); }

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string& message() const { return err_; }
  Error error() const { return Error{err_}; }

 private:
  std::string err_;
  bool failed_ = false;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T v) : v_(std::move(v)) {}                             // NOLINT: implicit by design
  Result(Error e) : v_(std::move(e)) {}                         // NOLINT
  Result(Status s) : v_(s.error()) { STRATA_ASSERT(!s.ok()); }  // NOLINT: only failed statuses convert

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & {
    STRATA_ASSERT(ok());
    return std::get<0>(v_);
  }
  const T& value() const& {
    STRATA_ASSERT(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    STRATA_ASSERT(ok());
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const std::string& message() const {
    STRATA_ASSERT(!ok());
    return std::get<1>(v_).message;
  }
  Error error() const {
    STRATA_ASSERT(!ok());
    return std::get<1>(v_);
  }
  Status status() const { return ok() ? Status() : Status(error()); }

 private:
  std::variant<T, Error> v_;
};

// printf-style error construction: return err("bad magic 0x%08x at offset %zu", m, off);
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
Error err(const char* fmt, ...);

// Prefix context onto an error message: "loading model.gguf: <inner>".
Error err_context(const std::string& ctx, const Error& inner);

}  // namespace strata

#define STRATA_CONCAT_INNER(a, b) a##b
#define STRATA_CONCAT(a, b) STRATA_CONCAT_INNER(a, b)

// Propagate a failed Status / Result. Usage: STRATA_TRY(do_thing());
#define STRATA_TRY(expr)                                                          \
  do {                                                                            \
    auto&& strata_try_tmp_ = (expr);                                              \
    if (!strata_try_tmp_.ok()) return ::strata::Error{strata_try_tmp_.message()}; \
  } while (0)

// Bind the value of a Result or propagate its error. Usage: STRATA_ASSIGN(auto f, open(path));
#define STRATA_ASSIGN(decl, expr) STRATA_ASSIGN_IMPL(STRATA_CONCAT(strata_res_, __LINE__), decl, expr)
#define STRATA_ASSIGN_IMPL(tmp, decl, expr)             \
  auto tmp = (expr);                                    \
  if (!tmp.ok()) return ::strata::Error{tmp.message()}; \
  decl = std::move(tmp).value()
