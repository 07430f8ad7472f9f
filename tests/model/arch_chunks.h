// Test helper: one sequence through an Architecture's forward in chunks of `chunk` tokens (n: one
// batch; 1: token by token), every row's logits [n][n_vocab]. so: the state's options (n_batch is
// set to chunk, n_ctx raised to at least n); keep: receives the state after the run.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <span>
#include <vector>

#include "model/arch.h"

namespace strata::testing {

inline std::vector<float> forward_chunks(const Architecture& arch, const std::vector<int32_t>& tokens,
                                         int chunk, ThreadPool& pool, StateOptions so = {},
                                         std::unique_ptr<ArchState>* keep = nullptr) {
  const int V = arch.hparams().n_vocab, n = static_cast<int>(tokens.size());
  std::vector<float> out(static_cast<size_t>(n) * V);
  so.n_ctx = std::max({so.n_ctx, 16, n});
  so.n_batch = chunk;
  auto st = arch.new_state(so);
  EXPECT_TRUE(st.ok()) << st.message();
  if (!st.ok()) return out;
  for (int i = 0; i < n; i += chunk) {
    const int m = std::min(chunk, n - i);
    Status s = forward_one(arch, **st, std::span<const int32_t>(tokens.data() + i, m), i, true,
                           out.data() + static_cast<size_t>(i) * V, pool);
    EXPECT_TRUE(s.ok()) << s.message();
    if (!s.ok()) break;
  }
  if (keep) *keep = std::move(*st);
  return out;
}

}  // namespace strata::testing
