// Always-on invariant checks (style.md §8): a violated invariant is a bug in strata, not bad
// input, so it aborts with file:line. Bad input is reported with Status/Result instead.
#pragma once

namespace strata {
[[noreturn]] void assert_fail(const char* expr, const char* file, int line, const char* msg);
}

#define STRATA_ASSERT(cond) ((cond) ? (void)0 : ::strata::assert_fail(#cond, __FILE__, __LINE__, nullptr))
#define STRATA_ASSERT_MSG(cond, msg) \
  ((cond) ? (void)0 : ::strata::assert_fail(#cond, __FILE__, __LINE__, (msg)))
