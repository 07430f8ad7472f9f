#include "kernels/sparse_attention.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <span>

#include "base/assert.h"
#include "kernels/ops.h"

namespace strata {

namespace {

// Typed rows that attention reads as f32 (kv_rows_read_as_f32) are converted once per chunk of
// at most kChunk tokens into f32 scratch — shared by every query head and token of the chunk, and
// by K and V (one row per key) — and the core runs over f32 views that keep the rows' indices (a
// ring for the window, a linear view of the visible compressed rows, the union of the selected
// rows with each token's list remapped to it), so its key blocks and products are the typed
// rows': the same bits.
constexpr int64_t kChunk = 64;
// A chunk's selected rows (their union): at most max(kSelRows, a token's selection).
constexpr int64_t kSelRows = 4096;

int64_t chunk_tokens(int64_t sel_stride) {
  return sel_stride > 0 ? std::clamp<int64_t>(kSelRows / sel_stride, 1, kChunk) : kChunk;
}

bool convert(GgmlType t) {
  return t != GgmlType::f32 && kv_rows_read_as_f32(t);
}

// What a step carves from the arena (element counts; 0: not carved), the op's and its price's one
// layout: n tokens of nh heads of hd, positions up to end, a selection of sel_stride rows per token
// (has_sel) or every visible compressed row, rotated rows (rot), window / compressed rows converted
// to f32 (cw / cc).
struct Layout {
  int64_t chunk = 0, wcap = 0;
  int64_t row = 0, qr = 0, wring = 0, cbuf = 0, uni = 0, sel2 = 0,
          keys = 0;  // uni, sel2: int32; keys: AttnKeys
};

Layout layout(int64_t n, int64_t hd, int64_t nh, int window, int ratio, bool has_comp, bool has_sel,
              int64_t sel_stride, int64_t end, bool rot, bool cw, bool cc) {
  Layout L;
  L.row = hd;
  L.qr = rot ? n * nh * hd : 0;
  L.chunk = cw || cc ? chunk_tokens(has_sel ? sel_stride : 0) : n;
  L.wcap = window - 1 + L.chunk;  // the f32 window ring: a chunk's rows, indices kept
  L.wring = cw ? L.wcap * hd : 0;
  // compressed rows: every visible one (no selection), else the chunk's selected ones
  const int64_t n_all = has_comp && !has_sel ? end / ratio : 0;
  const int64_t n_uni = has_sel ? std::min(L.chunk * sel_stride, end / ratio) : 0;
  L.cbuf = cc ? std::max(n_all, n_uni) * hd + 1 : 0;
  L.uni = L.sel2 = cc && has_sel ? L.chunk * sel_stride + 1 : 0;
  L.keys = L.chunk;
  return L;
}

template <class T>
uint64_t carved(int64_t count) {
  return count > 0 ? Arena::capacity_for(static_cast<size_t>(count) * sizeof(T)) : 0;
}

}  // namespace

uint64_t sparse_attention_scratch_bytes(int64_t n, int head_dim, int n_head, int window, int ratio,
                                        int64_t sel_stride, int64_t n_ctx, GgmlType type, bool rotated) {
  uint64_t most = 0;
  // a step's selection is at most sel_stride wide (fewer while few rows are visible), and a narrower
  // one takes longer chunks: the most over every width
  const bool cv = convert(type), sel = ratio > 0 && sel_stride > 0;
  for (int64_t stride = 0; stride <= (sel ? sel_stride : 0); ++stride) {
    const Layout L = layout(n, head_dim, n_head, window, ratio, ratio > 0, sel, stride, n_ctx, rotated, cv,
                            cv && ratio > 0);
    most = std::max(most, carved<float>(L.row) + carved<float>(L.qr) + carved<float>(L.wring) +
                              carved<float>(L.cbuf) + carved<int32_t>(L.uni) + carved<int32_t>(L.sel2) +
                              carved<AttnKeys>(L.keys));
  }
  return most;
}

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
  float* row = arena.alloc<float>(static_cast<size_t>(hd));  // Layout::row
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
  if (w.ratio == 0) comp = nullptr;
  const bool cw = convert(win.type), cc = comp && convert(comp->type);
  const Layout L = layout(n, hd, nh, w.window, w.ratio, comp != nullptr, w.sel != nullptr, w.sel_stride,
                          w.pos0 + n, rot, cw, cc);
  const float* q = w.q;
  if (rot) {
    float* qr = arena.alloc<float>(static_cast<size_t>(L.qr));
    std::memcpy(qr, w.q, sizeof(float) * static_cast<size_t>(n * nh * hd));
    for (int64_t h = 0; h < n * nh; ++h) hadamard_rotate(qr + h * hd, hd);
    q = qr;
  }
  STRATA_ASSERT(!cw || win.width == hd);
  STRATA_ASSERT(!cc || comp->width == hd);
  const int64_t chunk = L.chunk, wcap = L.wcap;
  const KvRows wf = cw ? KvRows::f32(arena.alloc<float>(static_cast<size_t>(L.wring)), hd, wcap, true) : win;
  float* cbuf = cc ? arena.alloc<float>(static_cast<size_t>(L.cbuf)) : nullptr;
  int32_t* uni = L.uni ? arena.alloc<int32_t>(static_cast<size_t>(L.uni)) : nullptr;
  int32_t* sel2 = L.sel2 ? arena.alloc<int32_t>(static_cast<size_t>(L.sel2)) : nullptr;
  KvRows cf = comp ? *comp : KvRows{};
  if (cc && !w.sel) {
    const int64_t n_all = (w.pos0 + n) / w.ratio;
    cf = KvRows::f32(cbuf, hd, n_all, false);
    for (int64_t j = 0; j < n_all; ++j) kv_to_f32(*comp, j, cf.row(j));
  }
  AttnKeys* keys = arena.alloc<AttnKeys>(static_cast<size_t>(L.keys));
  const AttnShape shape{static_cast<int>(nh), 1, static_cast<int>(hd), static_cast<int>(hd), w.scale, sinks};
  int64_t wdone = 0;  // window rows converted: a chunk's rows left by the previous one stay in the ring
  for (int64_t t0 = 0; t0 < n; t0 += chunk) {
    const int64_t t1 = std::min(n, t0 + chunk);
    for (int64_t j = std::max(wdone, w.pos0 + t0 - w.window + 1); cw && j < w.pos0 + t1; ++j)
      kv_to_f32(win, j, wf.row(j));
    wdone = w.pos0 + t1;
    const int32_t* sel = w.sel ? w.sel + t0 * w.sel_stride : nullptr;
    if (cc && w.sel) {
      // the chunk's selected rows, each converted once; the tokens' lists point into them
      int64_t nu = 0;
      for (int64_t t = t0; t < t1; ++t) {
        const int32_t* s = w.sel + t * w.sel_stride;
        nu = std::set_union(uni, uni + nu, s, s + w.sel_n[t], sel2) - sel2;
        std::copy(sel2, sel2 + nu, uni);
      }
      cf = KvRows::f32(cbuf, hd, nu, false);
      for (int64_t i = 0; i < nu; ++i) kv_to_f32(*comp, uni[i], cf.row(i));
      for (int64_t t = t0; t < t1; ++t)
        for (int64_t i = 0; i < w.sel_n[t]; ++i)
          sel2[(t - t0) * w.sel_stride + i] =
              static_cast<int32_t>(std::lower_bound(uni, uni + nu, w.sel[t * w.sel_stride + i]) - uni);
      sel = sel2;
    }
    for (int64_t t = t0; t < t1; ++t)
      new (&keys[t - t0])
          AttnKeys(sparse_keys(wf, w.window, comp ? &cf : nullptr, w.ratio, w.pos0 + t,
                               sel ? sel + (t - t0) * w.sel_stride : nullptr, w.sel ? w.sel_n[t] : 0));
    attend(shape, q + t0 * nh * hd, t1 - t0, std::span<const AttnKeys>(keys, static_cast<size_t>(t1 - t0)),
           w.out + t0 * nh * hd, pool);
  }
  if (rot)
    for (int64_t h = 0; h < n * nh; ++h) hadamard_rotate(w.out + h * hd, hd);
  arena.rewind(mark);
}

}  // namespace strata
