#include "model/deepseek_v41/v41_select.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace strata::v41 {

void torch_topk(const float* v, int64_t n, int64_t k, std::vector<int32_t>* out) {
  out->clear();
  k = std::min(k, n);
  if (k <= 0) return;
  using Elem = std::pair<float, int64_t>;  // (value, index), as ATen's topk_impl_loop queues them
  std::vector<Elem> q(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) q[static_cast<size_t>(i)] = {v[i], i};
  auto before = [](const Elem& x, const Elem& y) {
    return (std::isnan(x.first) && !std::isnan(y.first)) || x.first > y.first;
  };
  if (k * 64 <= n)
    std::partial_sort(q.begin(), q.begin() + k, q.end(), before);
  else
    std::nth_element(q.begin(), q.begin() + (k - 1), q.end(), before);
  for (int64_t i = 0; i < k; ++i) out->push_back(static_cast<int32_t>(q[static_cast<size_t>(i)].second));
  std::sort(out->begin(), out->end());
}

void candidate_mask(const float* scores, int64_t lens, int block, int topk_blocks,
                    std::vector<uint8_t>* keep) {
  keep->assign(static_cast<size_t>(lens), 0);
  if (lens <= 0) return;
  const int64_t nb = (lens + block - 1) / block;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::vector<float> bs(static_cast<size_t>(nb), -kInf);
  for (int64_t i = 0; i < lens; ++i) bs[i / block] = std::max(bs[i / block], scores[i]);
  bs[static_cast<size_t>((lens - 1) / block)] = kInf;
  std::vector<int32_t> kept;
  torch_topk(bs.data(), nb, topk_blocks, &kept);
  for (int32_t b : kept) {
    if (!(bs[b] > -kInf)) continue;
    for (int64_t i = int64_t{b} * block; i < std::min<int64_t>(lens, (int64_t{b} + 1) * block); ++i)
      (*keep)[static_cast<size_t>(i)] = 1;
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
  std::vector<float> sc(scores, scores + lens);
  if (mask)
    for (int64_t i = 0; i < lens; ++i)
      if (!mask[i]) sc[static_cast<size_t>(i)] = -kInf;
  torch_topk(sc.data(), lens, k, out);
}

}  // namespace strata::v41
