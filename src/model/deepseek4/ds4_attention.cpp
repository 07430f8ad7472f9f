#include "model/deepseek4/ds4_attention.h"

#include <algorithm>

#include "base/assert.h"
#include "model/deepseek4/ds4_compressor.h"

namespace strata::ds4 {

AttnKeys ds4_keys(const RowCache& window, int n_swa, const RowCache* comp, int ratio, int64_t pos,
                  const int32_t* sel, int64_t n_sel) {
  AttnKeys ks;
  ks.ranges[0] = {&window.view(), &window.view(), std::max<int64_t>(0, pos - n_swa + 1), pos + 1};
  ks.n_ranges = 1;
  if (ratio == 0) return ks;
  STRATA_ASSERT(comp != nullptr);
  if (ratio == 128) {
    ks.ranges[1] = {&comp->view(), &comp->view(), 0, compressed_visible(pos, ratio)};
    ks.n_ranges = 2;
  } else {
    ks.list = {&comp->view(), &comp->view(), sel, n_sel};
  }
  return ks;
}

}  // namespace strata::ds4
