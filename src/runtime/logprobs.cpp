#include "runtime/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/status.h"

namespace strata {

TokenLogprob token_logprob(std::span<const float> row, int32_t token, int n_top) {
  STRATA_ASSERT(token >= 0 && static_cast<size_t>(token) < row.size());
  float mx = -std::numeric_limits<float>::infinity();
  for (float v : row) mx = std::max(mx, v);
  double sum = 0;
  for (float v : row) sum += std::exp(static_cast<double>(v) - mx);
  const double log_z = static_cast<double>(mx) + std::log(sum);
  auto lp = [&](int32_t id) {
    return static_cast<float>(static_cast<double>(row[static_cast<size_t>(id)]) - log_z);
  };
  TokenLogprob out;
  out.id = token;
  out.logprob = lp(token);
  // The top n by insertion into a short sorted list (n is at most a few dozen).
  const size_t n = std::min(static_cast<size_t>(std::max(n_top, 0)), row.size());
  std::vector<int32_t> best;
  best.reserve(n + 1);
  auto better = [&](int32_t a, int32_t b) {
    const float la = row[static_cast<size_t>(a)], lb = row[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  for (size_t i = 0; i < row.size() && n > 0; ++i) {
    const int32_t id = static_cast<int32_t>(i);
    if (best.size() == n && !better(id, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), id, better), id);
    if (best.size() > n) best.pop_back();
  }
  out.top.reserve(best.size());
  for (int32_t id : best) out.top.push_back({id, lp(id)});
  return out;
}

}  // namespace strata
