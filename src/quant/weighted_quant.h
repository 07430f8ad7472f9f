// Quantizers that weight the error by an importance matrix (`strata quantize --imatrix`): each
// element's squared error counts qw[col]·sqrt(σ² + x²) (qw: the mean square of the activations
// that column meets, from `strata imatrix`; σ²: the row's mean square, f32, so small weights still
// count; Q6_K: qw alone), and each block's scale is searched to minimise that weighted error:
//   Q4_0 / Q5_0 / Q6_K groups: the absmax grid and 18 around it, least-squares scale each;
//   Q4_K / Q5_K sub-blocks and Q5_1 blocks: 37 grids of the scale-and-min fit (quant/k_fit.h), and
//     the K-quants' 6-bit scales and mins fitted under each sub-block's total importance;
//   MXFP4: the shared exponent of the absmax rule and its two neighbours (llama-quantize ignores
//     the importance matrix for MXFP4).
// The searches of the other types, their f32 operation order and tie rules are llama-quantize
// v0.5.0's, so the bytes equal `llama-quantize --imatrix` (checked on the bundled model: Q4_0,
// Q5_0, Q6_K, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M and the Q5_1 / Q5_0 fallbacks). One difference: a
// block whose importance is all zero (a column no calibration token reached) is fitted with equal
// weights instead of collapsing to zero. Without an importance matrix `strata quantize` uses
// weight_quant.h's byte-exact quantizers.
#pragma once

#include <cstdint>

#include "quant/qtypes.h"

namespace strata {

// One row of n elements (n % block_size == 0) with its importance qw[0..n) (>= 0, finite).
using WeightedQuantFn = void (*)(const float* src, void* dst, int64_t n, const float* qw);

// The importance-weighted quantizer of a type, or nullptr (the type ignores an importance matrix).
WeightedQuantFn weighted_quantizer(GgmlType t);

}  // namespace strata
