// DeepSeek-V4 lightning indexer (CSA layers; deepseek-v4.md §2.3.4, fixtures README §7).
//
//   keys  k_s  [ihd]      = overlapping ratio-4 compressor on c (own weights), normed, roped at 4s
//   query qi   [ih][ihd]  = indexer.attn_q_b . qr, roped at the query position
//   w          [ih]       = (indexer.proj . c) / sqrt(ihd * ih)
//   I(t, s) = sum_h w_h * relu(qi_h . k_s)
// The query attends the top min(top_k, n_visible) visible entries (s < floor((t+1)/4)); top_k is
// the model's, or a sequence's smaller one (SeqKnobs::index_topk_share, the fast profile's).
//
// llama.cpp multiplies qi and the stored keys by an orthonormal Walsh-Hadamard matrix (blocks of
// hadamard_block(ihd) dims). H^T H = I so the scores are unchanged up to rounding; we apply it
// the same way so that near-tied selections break the same way.
#pragma once

#include <cstdint>
#include <vector>

namespace strata::ds4 {

// Largest power of two >= 64 dividing head_dim (llama.cpp's rotation size); 0 if 64 does not
// divide head_dim (no rotation).
int hadamard_block(int head_dim);

// Sylvester construction, scaled by 1/sqrt(n): H [n][n] row-major, symmetric, H*H = I.
// PRECOND: n is a power of two.
std::vector<float> hadamard_matrix(int n);

// x [len] <- per n-block: x_blk = H . x_blk. PRECOND: len % n == 0.
// PRECOND: H symmetric (hadamard_matrix), n <= 1024.
void hadamard_rotate(const float* H, int n, float* x, int64_t len);

// Scores of n_keys keys (rows of keys [n_keys][ihd]) for one query (qi [ih][ihd], w [ih]).
void indexer_scores(const float* qi, const float* w, const float* keys, int64_t n_keys, int ih, int ihd,
                    float* scores);

// Indices of the k largest of scores[0..n) (k clamped to n), ordered by descending score, ties
// by lower index. Returns the count written to idx. order: scratch for n indices.
int64_t topk_indices(const float* scores, int64_t n, int64_t k, int32_t* idx, int32_t* order);

}  // namespace strata::ds4
