// The official V4.1 checkpoint's quantized weight encodings, converted to f32 at load
// (../shared/docs/deepseek-v4.md §3.2):
//   FP8  dense / shared-expert linears: F8_E4M3 [out, in] + `<stem>.scale` F8_E8M0
//        [ceil(out/br), ceil(in/bc)] (UE8M0, one power of two per br x bc tile);
//   FP4  routed experts: I8/U8 [out, in/2] (E2M1 pairs, element 2i in the low nibble) +
//        `<stem>.scale` F8_E8M0 [out, in/32] (= OCP MXFP4);
//   Engram tables: F8_E4M3 values and F8_E8M0 per-32 scales as separate tensors (plain decode).
// Every product e4m3/e2m1 x 2^k is exact in f32 (and in bf16 for the checkpoint's ranges), so the
// converted weights run through the same bf16/f32 path as a BF16 checkpoint. What is not
// reproduced: the reference's FP8 activation rounding in its FP8 GEMMs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/safetensors.h"

namespace strata::v41 {

// `<stem>.weight` -> `<stem>.scale`; other names get ".scale" appended.
std::string scale_name_of(const std::string& weight_name);

// FP8 block-scaled matrix -> f32 [out * in]. `where` prefixes errors (file: tensor).
Status dequant_fp8_blocks(const StTensor& w, const StTensor& scale, int64_t out, int64_t in, int block_r,
                          int block_c, const std::string& where, std::vector<float>* dst);
// FP4 (E2M1 pairs + per-32 UE8M0) matrix -> f32 [out * in]; in % 32 == 0.
Status dequant_fp4_mx(const StTensor& w, const StTensor& scale, int64_t out, int64_t in,
                      const std::string& where, std::vector<float>* dst);
// FP4 matrix -> MXFP4 blocks (quant/qtypes.h BlockMxfp4) [out][in/32], losslessly: the same E2M1
// codes and UE8M0 scales, nibbles reordered (DeepSeek: element 2i low, 2i+1 high; MXFP4: element j
// low, j+16 high). dst: out*in/32 blocks. A NaN scale (0xff) is an error naming the tensor.
Status fp4_to_mxfp4(const StTensor& w, const StTensor& scale, int64_t out, int64_t in,
                    const std::string& where, uint8_t* dst);
// Element-wise decodes of F8_E4M3 / F8_E8M0 tensors (Engram values / scales) -> f32.
void decode_e4m3(const StTensor& t, std::vector<float>* dst);
void decode_ue8m0(const StTensor& t, std::vector<float>* dst);

}  // namespace strata::v41
