// V4.1's two-level ("hierarchical") compressed-position selection (deepseek-v4.md §4.3; fixtures
// README "Layer modes"). For one query that sees `lens` compressed positions with indexer
// scores s[0..lens):
//   candidate source layer: block b = positions [b*B, (b+1)*B); block score = max of its members;
//     the block holding the newest visible position is always kept (+inf); keep the best
//     `topk_blocks` blocks -> candidate mask (published to later index sources);
//   later index sources: scores outside the candidates become -inf;
//   every index source: top-k (k = min(index_topk, lens)) by score; when k >= lens every
//     visible position is selected (candidate-masked ones included, as the reference does).
// Ties keep the lower position / block (the reference's order is unspecified there).
#pragma once

#include <cstdint>
#include <vector>

namespace strata::v41 {

// keep[i] (i < lens) = 1 if position i lies in a kept block.
void candidate_mask(const float* scores, int64_t lens, int block, int topk_blocks,
                    std::vector<uint8_t>* keep);

// Selected positions, ascending. `mask` may be null (no candidate filter); masked-out
// positions score -inf.
void select_topk(const float* scores, const uint8_t* mask, int64_t lens, int k, std::vector<int32_t>* out);

}  // namespace strata::v41
