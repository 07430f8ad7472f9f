#include "kernels/sparse_attention.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <span>

#include "base/assert.h"
#include "kernels/ops.h"

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
  const size_t mark = arena.mark();
  // rows of a quantized type hold Hadamard-rotated values (kernels/kv_rows.h): rotate the new
  // rows before they are stored, the queries before q·k, the output after Σ p·v (H = H⁻¹)
  const bool rot = win.hadamard;
  STRATA_ASSERT(!comp || comp->hadamard == rot);
  float* row = arena.alloc<float>(static_cast<size_t>(hd));
  auto store = [&](const KvRows& r, int64_t i, const float* x) {
    if (rot) {
      std::memcpy(row, x, sizeof(float) * static_cast<size_t>(hd));
      hadamard_rotate(row, hd);
      x = row;
    }
    kv_store(r, i, 0, x, hd);
  };
  for (int64_t t = 0; t < n; ++t) store(win, w.pos0 + t, w.kv_new + t * hd);
  for (int64_t j = 0; comp && j < w.n_comp_new; ++j) store(*comp, w.comp_row0 + j, w.comp_new + j * hd);
  const float* q = w.q;
  if (rot) {
    float* qr = arena.alloc<float>(static_cast<size_t>(n * nh * hd));
    std::memcpy(qr, w.q, sizeof(float) * static_cast<size_t>(n * nh * hd));
    for (int64_t h = 0; h < n * nh; ++h) hadamard_rotate(qr + h * hd, hd);
    q = qr;
  }
  AttnKeys* keys = arena.alloc<AttnKeys>(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    const int32_t* sel = w.sel ? w.sel + t * w.sel_stride : nullptr;
    new (&keys[t]) AttnKeys(sparse_keys(win, w.window, w.ratio ? comp : nullptr, w.ratio, w.pos0 + t, sel,
                                        w.sel ? w.sel_n[t] : 0));
  }
  const AttnShape shape{static_cast<int>(nh), 1, static_cast<int>(hd), static_cast<int>(hd), w.scale, sinks};
  attend(shape, q, n, std::span<const AttnKeys>(keys, static_cast<size_t>(n)), w.out, pool);
  if (rot)
    for (int64_t h = 0; h < n * nh; ++h) hadamard_rotate(w.out + h * hd, hd);
  arena.rewind(mark);
}

}  // namespace strata
