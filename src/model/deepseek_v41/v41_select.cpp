#include "model/deepseek_v41/v41_select.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace strata::v41 {

void candidate_mask(const float* scores, int64_t lens, int block, int topk_blocks,
                    std::vector<uint8_t>* keep) {
  keep->assign(static_cast<size_t>(lens), 0);
  if (lens <= 0) return;
  const int64_t nb = (lens + block - 1) / block;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::vector<float> bs(static_cast<size_t>(nb), -kInf);
  for (int64_t i = 0; i < lens; ++i) bs[i / block] = std::max(bs[i / block], scores[i]);
  bs[static_cast<size_t>((lens - 1) / block)] = kInf;
  std::vector<int64_t> ord(static_cast<size_t>(nb));
  std::iota(ord.begin(), ord.end(), 0);
  const int64_t kb = std::min<int64_t>(topk_blocks, nb);
  std::stable_sort(ord.begin(), ord.end(), [&](int64_t a, int64_t b) { return bs[a] > bs[b]; });
  for (int64_t r = 0; r < kb; ++r) {
    const int64_t b = ord[static_cast<size_t>(r)];
    if (!(bs[b] > -kInf)) continue;
    for (int64_t i = b * block; i < std::min<int64_t>(lens, (b + 1) * block); ++i) (*keep)[i] = 1;
  }
}

void select_topk(const float* scores, const uint8_t* mask, int64_t lens, int k, std::vector<int32_t>* out) {
  out->clear();
  if (lens <= 0) return;
  if (k >= lens) {
    for (int64_t i = 0; i < lens; ++i) out->push_back(static_cast<int32_t>(i));
    return;
  }
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::vector<int32_t> ord(static_cast<size_t>(lens));
  std::iota(ord.begin(), ord.end(), 0);
  auto sc = [&](int32_t i) { return (mask && !mask[i]) ? -kInf : scores[i]; };
  std::stable_sort(ord.begin(), ord.end(), [&](int32_t a, int32_t b) { return sc(a) > sc(b); });
  out->assign(ord.begin(), ord.begin() + k);
  std::sort(out->begin(), out->end());
}

}  // namespace strata::v41
