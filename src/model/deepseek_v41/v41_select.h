// V4.1's two-level ("hierarchical") compressed-position selection (deepseek-v4.md §4.3; fixtures
// README "Layer modes"). For one query that sees `lens` compressed positions with indexer
// scores s[0..lens):
//   candidate source layer: block b = positions [b*B, (b+1)*B); block score = max of its members;
//     the block holding the newest visible position is always kept (+inf); keep the best
//     `topk_blocks` blocks -> candidate mask (published to later index sources);
//   later index sources: scores outside the candidates become -inf;
//   every index source: top-k (k = min(index_topk, lens)) by score; when k >= lens every
//     visible position is selected (candidate-masked ones included, as the reference does).
// Ties: the reference's torch.topk keeps, among equal scores, the ones its CPU algorithm leaves in
// front (torch_topk below), not the lowest positions; the same algorithm is run here.
#pragma once

#include <cstdint>
#include <vector>

namespace strata::v41 {

// The k (<= n) indices torch.topk(largest) returns on CPU (ATen topk_impl_loop, torch 1.13 as the
// reference ran it), ascending. ATen queues (value, index) pairs in index order and runs
// std::partial_sort of the first k when k * 64 <= n, else std::nth_element at k - 1, comparing
// values only (NaN first); among equal values the algorithm's element moves decide which are kept
// (e.g. scores {0.9, -inf, 0.8, 0.7, 0.7}, k = 3 -> {0, 2, 4}, not {0, 2, 3}). The same
// algorithm over the same queue gives the same set.
void torch_topk(const float* v, int64_t n, int64_t k, std::vector<int32_t>* out);

// keep[i] (i < lens) = 1 if position i lies in a kept block.
void candidate_mask(const float* scores, int64_t lens, int block, int topk_blocks,
                    std::vector<uint8_t>* keep);

// Selected positions, ascending. `mask` may be null (no candidate filter); masked-out
// positions score -inf.
void select_topk(const float* scores, const uint8_t* mask, int64_t lens, int k, std::vector<int32_t>* out);

}  // namespace strata::v41
