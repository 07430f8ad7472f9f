// Quantizers that weight the error by an importance matrix (`strata quantize --imatrix`): each
// element's squared error counts qw[col]·sqrt(σ² + x²) (qw: the mean square of the activations
// that column meets, from `strata imatrix`; σ²: the row's mean square, so small weights still
// count), and each block's scale is searched to minimise that weighted error:
//   Q4_0 / Q5_0 / Q6_K groups: 19 grids around the absmax grid, least-squares scale each;
//   Q4_K / Q5_K sub-blocks: 37 grids of the scale-and-min fit (quant/k_fit.h);
//   MXFP4: the shared exponent of the absmax rule and its two neighbours.
// Not byte-exact with llama-quantize --imatrix (its searches differ in detail); without an
// importance matrix `strata quantize` uses weight_quant.h's byte-exact quantizers.
#pragma once

#include <cstdint>

#include "quant/qtypes.h"

namespace strata {

// One row of n elements (n % block_size == 0) with its importance qw[0..n) (>= 0, finite).
using WeightedQuantFn = void (*)(const float* src, void* dst, int64_t n, const float* qw);

// The importance-weighted quantizer of a type, or nullptr (the type ignores an importance matrix).
WeightedQuantFn weighted_quantizer(GgmlType t);

}  // namespace strata
