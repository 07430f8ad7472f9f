// Weight quantizers: the from-float conversions llama-quantize applies to a weight tensor without
// an importance matrix, byte-exact with llama.cpp v0.5.0 (`strata quantize` relies on it). They
// differ from quant_ref.h's from_float where that one models the activation path (Q8_0: the SIMD
// builds' 127/amax and round-half-even; weights use d = amax/127, x·(1/d) and round-half-away)
// or a simple fit (Q6_K: weights search 18 scales per 16-element group, as ggml's reference does).
//
// Conventions as in quant_ref.h: n elements, PRECOND n % block_size == 0; no alignment needed.
// The code is compiled without FMA contraction (no -march, no -ffp-contract=fast), like ggml-base,
// so every product and sum rounds as there.
#pragma once

#include <cstdint>

#include "quant/quant_ref.h"

namespace strata {

// Q8_0 weights: d = amax/127 (stored fp16), q = round-half-away(x · (1/d)).
void quantize_weights_q8_0(const float* src, void* dst, int64_t n);

// Q6_K weights: per 16-element group the scale is fitted by a least-squares search over 19
// candidate grids weighted by x² (ggml's make_qx_quants, rmse type 1), the 16 group scales are
// then quantized to int8 against the block's largest one and the values re-rounded to them.
void quantize_weights_q6_k(const float* src, void* dst, int64_t n);

// The weight quantizer of a type: F32 (copy), F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1, MXFP4, Q4_K (k_fit.h),
// Q5_K, Q6_K (byte-exact with llama-quantize), NVFP4 (searched scales, which llama.cpp has no file
// type for); nullptr for the others.
FromFloatFn weight_quantizer(GgmlType t);

}  // namespace strata
