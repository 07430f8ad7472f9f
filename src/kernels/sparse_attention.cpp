#include "kernels/sparse_attention.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <span>

#include "base/assert.h"

namespace strata {

AttnKeys sparse_keys(const KvRows& win, int window, const KvRows* comp, int ratio, int64_t pos,
                     const int32_t* sel, int64_t n_sel) {
  AttnKeys ks;
  ks.ranges[0] = {&win, &win, std::max<int64_t>(0, pos - window + 1), pos + 1};
  ks.n_ranges = 1;
  if (comp == nullptr) return ks;
  if (sel == nullptr) {
    STRATA_ASSERT(ratio > 0);
    ks.ranges[1] = {comp, comp, 0, (pos + 1) / ratio};
    ks.n_ranges = 2;
  } else {
    ks.list = {comp, comp, sel, n_sel};
  }
  return ks;
}

void sparse_attention(const DeviceSparseAttnWork& w, const KvRows& win, const KvRows* comp,
                      const float* sinks, ThreadPool& pool, Arena& arena) {
  const int64_t n = w.n, hd = w.head_dim, nh = w.n_head;
  for (int64_t t = 0; t < n; ++t) std::memcpy(win.row(w.pos0 + t), w.kv_new + t * hd, sizeof(float) * hd);
  for (int64_t j = 0; comp && j < w.n_comp_new; ++j)
    std::memcpy(comp->row(w.comp_row0 + j), w.comp_new + j * hd, sizeof(float) * hd);
  const size_t mark = arena.mark();
  AttnKeys* keys = arena.alloc<AttnKeys>(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    const int32_t* sel = w.sel ? w.sel + t * w.sel_stride : nullptr;
    new (&keys[t]) AttnKeys(sparse_keys(win, w.window, w.ratio ? comp : nullptr, w.ratio, w.pos0 + t, sel,
                                        w.sel ? w.sel_n[t] : 0));
  }
  const AttnShape shape{static_cast<int>(nh), 1, static_cast<int>(hd), static_cast<int>(hd), w.scale, sinks};
  attend(shape, w.q, n, std::span<const AttnKeys>(keys, static_cast<size_t>(n)), w.out, pool);
  arena.rewind(mark);
}

}  // namespace strata
