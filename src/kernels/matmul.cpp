#include "kernels/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

namespace strata {
namespace {

// Rows per work item handed to a thread: small enough that both threads stay busy to the end
// (a shared machine deschedules threads at random), large enough that the counter is cold.
constexpr int64_t kRowsPerItem = 64;

// fn(item) for item in [0, n_items) on every pool thread, items taken from an atomic counter:
// one barrier per call, and a thread that is slow or preempted does not hold up the others.
template <class Fn>
void run_items(ThreadPool& pool, int64_t n_items, const Fn& fn) {
  if (pool.size() <= 1 || n_items <= 1) {
    for (int64_t i = 0; i < n_items; ++i) fn(i);
    return;
  }
  std::atomic<int64_t> next{0};
  pool.run([&](int, int) {
    for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < n_items;
         i = next.fetch_add(1, std::memory_order_relaxed))
      fn(i);
  });
}

// "[64, 128, 8]" (TensorView::shape_string lives in format/, which kernels does not link).
std::string dims(const TensorView& w) {
  std::string s = "[";
  for (int i = 0; i < std::max(w.n_dims, 1); ++i) s += (i ? ", " : "") + std::to_string(w.ne[i]);
  return s + "]";
}

Status check_weight_2d(const TensorView& w, const KernelTraits& kt, const QuantizedActs& x) {
  if (!kt.can_matmul())
    return err("matmul: weight '%s' has type %s, which has no kernels", w.name.c_str(), type_name(w.type));
  if (w.data == nullptr) return err("matmul: weight '%s' has no data", w.name.c_str());
  if (x.type != kt.vec_dot_type) {
    return err("matmul: weight '%s' (%s) needs activations in %s, got %s", w.name.c_str(), type_name(w.type),
               type_name(kt.vec_dot_type), type_name(x.type));
  }
  if (w.ne[0] != x.n) {
    return err("matmul: weight '%s' %s has %lld inputs but activations have %lld", w.name.c_str(),
               dims(w).c_str(), static_cast<long long>(w.ne[0]), static_cast<long long>(x.n));
  }
  const int64_t bs = type_info(w.type).block_size;
  if (w.ne[0] <= 0 || w.ne[0] % bs != 0 || w.ne[1] < 0 || w.ne[2] < 1) {
    return err("matmul: weight '%s' %s: row length must be a positive multiple of %s's block size %lld",
               w.name.c_str(), dims(w).c_str(), type_name(w.type), static_cast<long long>(bs));
  }
  const size_t rb = row_bytes(w.type, w.ne[0]);
  if (w.nb[1] < rb)
    return err("matmul: weight '%s' row stride %zu is below its row size %zu", w.name.c_str(), w.nb[1], rb);
  // Every byte a product reads must lie inside the view (when its size is known).
  if (w.ne[1] > 0 && w.nbytes != 0) {
    const size_t last =
        static_cast<size_t>(w.ne[1] - 1) * w.nb[1] + static_cast<size_t>(w.ne[2] - 1) * w.nb[2] + rb;
    if (last > w.nbytes) {
      return err("matmul: weight '%s' %s needs %zu bytes but its view has %zu", w.name.c_str(),
                 dims(w).c_str(), last, w.nbytes);
    }
  }
  return Status();
}

// Rows [r0, r1) of W (rows ws bytes apart from w0) against nt activation rows: y_of(t)[r] =
// W_r · x_of(t). One token with a gemv kernel: one gemv call, when that gemv gives the many-token
// path's bits or batch invariance is off (else one token takes the many-token path too). Else, with a panel
// kernel, one call per kGemmPanelTokens tokens (also for one token: prefill and decode then share every
// element's arithmetic, so a MoE's near-tied routing cannot tip differently between them). With a tile
// kernel, rows go in chunks of kRowChunk (held in L2 while every token passes) and within a chunk tile by
// tile, so a tile's activations stay in L1 across the chunk's row groups; else one vec_dot per output.
constexpr int64_t kRowChunk = 32;

template <class XOf, class YOf>
void product_rows(const KernelTraits& kt, int64_t n, const uint8_t* w0, size_t ws, int64_t r0, int64_t r1,
                  int64_t nt, XOf x_of, YOf y_of) {
  if (nt == 1 && kt.gemv != nullptr && r1 > r0 && (kt.gemv_invariant || !batch_invariant())) {
    kt.gemv(n, w0 + static_cast<size_t>(r0) * ws, ws, r1 - r0, x_of(0), y_of(0) + r0);
    return;
  }
  if (kt.gemm_panel != nullptr && r1 > r0) {
    const void* xp[kGemmPanelTokens];
    float* yp[kGemmPanelTokens];
    for (int64_t t0 = 0; t0 < nt; t0 += kGemmPanelTokens) {
      const int k = static_cast<int>(std::min<int64_t>(kGemmPanelTokens, nt - t0));
      for (int i = 0; i < k; ++i) {
        xp[i] = x_of(t0 + i);
        yp[i] = y_of(t0 + i) + r0;
      }
      kt.gemm_panel(n, w0 + static_cast<size_t>(r0) * ws, ws, r1 - r0, xp, k, yp);
    }
    return;
  }
  if (kt.gemm == nullptr) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* wr = w0 + static_cast<size_t>(r) * ws;
      for (int64_t t = 0; t < nt; ++t) y_of(t)[r] = kt.vec_dot(n, wr, x_of(t));
    }
    return;
  }
  const void* xt[kGemmTileTokens];
  float* yt[kGemmTileTokens];
  for (int64_t c0 = r0; c0 < r1; c0 += kRowChunk) {
    const int64_t c1 = std::min(r1, c0 + kRowChunk);
    for (int64_t t0 = 0; t0 < nt; t0 += kGemmTileTokens) {
      const int k = static_cast<int>(std::min<int64_t>(kGemmTileTokens, nt - t0));
      for (int i = 0; i < k; ++i) xt[i] = x_of(t0 + i);
      for (int64_t r = c0; r < c1; r += kGemmTileRows) {
        const int nr = static_cast<int>(std::min<int64_t>(kGemmTileRows, c1 - r));
        for (int i = 0; i < k; ++i) yt[i] = y_of(t0 + i) + r;
        kt.gemm(n, w0 + static_cast<size_t>(r) * ws, ws, nr, xt, k, yt);
      }
    }
  }
}

std::atomic<bool>& invariant_flag() {
  static std::atomic<bool> on{[] {
    const char* e = std::getenv("STRATA_BATCH_INVARIANT");
    return !(e && (std::string(e) == "0" || std::string(e) == "off"));
  }()};
  return on;
}

}  // namespace

bool batch_invariant() {
  return invariant_flag().load(std::memory_order_relaxed);
}

void set_batch_invariant(bool on) {
  invariant_flag().store(on, std::memory_order_relaxed);
}

Status quantize_activations(GgmlType type, const float* x, int64_t n_tokens, int64_t n, QuantizedActs& out,
                            ThreadPool* pool) {
  const KernelTraits& kt = kernel_traits(type);
  if (!kt.supported() || kt.from_float == nullptr) {
    return err("quantize_activations: no conversion to %s", type_name(type));
  }
  const int64_t bs = type_info(type).block_size;
  if (n <= 0 || n % bs != 0) {
    return err("quantize_activations: row length %lld is not a positive multiple of %s's block size %lld",
               static_cast<long long>(n), type_name(type), static_cast<long long>(bs));
  }
  if (n_tokens < 0)
    return err("quantize_activations: negative token count %lld", static_cast<long long>(n_tokens));
  out.type = type;
  out.n_tokens = n_tokens;
  out.n = n;
  out.row_stride = row_bytes(type, n);
  if (type == GgmlType::f32) {
    out.data = reinterpret_cast<const uint8_t*>(x);
    return Status();
  }
  uint8_t* dst = static_cast<uint8_t*>(
      out.buf.reserve(out.row_stride * static_cast<size_t>(std::max<int64_t>(n_tokens, 1))));
  out.data = dst;
  const size_t stride = out.row_stride;
  auto convert = [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) kt.from_float(x + t * n, dst + static_cast<size_t>(t) * stride, n);
  };
  if (pool != nullptr && n_tokens > 1) {
    pool->parallel_for(n_tokens, [&convert](int64_t b, int64_t e) { convert(b, e); });
  } else {
    convert(0, n_tokens);
  }
  return Status();
}

Status matmul_q(const TensorView& w, const QuantizedActs& x, float* y, ThreadPool& pool, int64_t ldy) {
  const KernelTraits& kt = kernel_traits(w.type);
  STRATA_TRY(check_weight_2d(w, kt, x));
  if (w.ne[2] != 1 || w.ne[3] != 1) {
    return err("matmul: weight '%s' %s is not 2-D (use slice2d or matmul_id)", w.name.c_str(),
               dims(w).c_str());
  }
  const int64_t out = w.ne[1];
  if (ldy == 0) ldy = out;
  if (ldy < out)
    return err("matmul: output stride %lld < %lld outputs", static_cast<long long>(ldy),
               static_cast<long long>(out));
  const int64_t n = x.n, n_tokens = x.n_tokens;
  const uint8_t* w0 = static_cast<const uint8_t*>(w.data);
  matmul_rows_parallel(pool, kt, n, w0, w.nb[1], out, x.data, x.row_stride, n_tokens, y, ldy);
  return Status();
}

void matmul_rows(const KernelTraits& kt, int64_t n, const void* w, size_t w_stride, int64_t r0, int64_t r1,
                 const void* x, size_t x_stride, int64_t nt, float* y, int64_t ldy) {
  const uint8_t* xb = static_cast<const uint8_t*>(x);
  product_rows(
      kt, n, static_cast<const uint8_t*>(w), w_stride, r0, r1, nt,
      [xb, x_stride](int64_t t) { return xb + static_cast<size_t>(t) * x_stride; },
      [y, ldy](int64_t t) { return y + t * ldy; });
}

void matmul_rows_gather(const KernelTraits& kt, int64_t n, const void* w, size_t w_stride, int64_t r0,
                        int64_t r1, const void* const* x, int64_t nt, float* y, int64_t ldy) {
  product_rows(
      kt, n, static_cast<const uint8_t*>(w), w_stride, r0, r1, nt, [x](int64_t t) { return x[t]; },
      [y, ldy](int64_t t) { return y + t * ldy; });
}

void matmul_rows_parallel(ThreadPool& pool, const KernelTraits& kt, int64_t n, const void* w, size_t w_stride,
                          int64_t n_rows, const void* x, size_t x_stride, int64_t nt, float* y, int64_t ldy) {
  // Items of two kRowsPerItem blocks (half the gemv kernels' per-call activation setup), except
  // the last 2·threads blocks, one each, so the region ends on small items. Every row gets the
  // same arithmetic whatever its item.
  const int64_t blocks = (n_rows + kRowsPerItem - 1) / kRowsPerItem;
  const int64_t pairs = std::max<int64_t>(0, blocks - 2 * int64_t{pool.size()}) / 2;
  run_items(pool, blocks - pairs, [&](int64_t i) {
    const int64_t b0 = i < pairs ? 2 * i : i + pairs, b1 = i < pairs ? b0 + 2 : b0 + 1;
    matmul_rows(kt, n, w, w_stride, b0 * kRowsPerItem, std::min(n_rows, b1 * kRowsPerItem), x, x_stride, nt,
                y, ldy);
  });
}

Status matmul(const TensorView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
              QuantizedActs& scratch, int64_t ldy) {
  const KernelTraits& kt = kernel_traits(w.type);
  if (!kt.can_matmul())
    return err("matmul: weight '%s' has type %s, which has no kernels", w.name.c_str(), type_name(w.type));
  STRATA_TRY(quantize_activations(kt.vec_dot_type, x, n_tokens, w.ne[0], scratch, &pool));
  return matmul_q(w, scratch, y, pool, ldy);
}

Status matmul_id(const TensorView& w, const QuantizedActs& x, const int32_t* ids, int64_t n_tokens,
                 int64_t n_used, float* y, ThreadPool& pool, MatmulIdScratch& scratch) {
  const KernelTraits& kt = kernel_traits(w.type);
  STRATA_TRY(check_weight_2d(w, kt, x));
  if (w.ne[3] != 1) return err("matmul_id: weight '%s' %s is 4-D", w.name.c_str(), dims(w).c_str());
  if (n_used <= 0) return err("matmul_id: n_used must be positive, got %lld", static_cast<long long>(n_used));
  const bool per_slot = x.n_tokens == n_tokens * n_used;
  if (!per_slot && x.n_tokens != n_tokens) {
    return err("matmul_id: activations have %lld rows; expected %lld (per token) or %lld (per slot)",
               static_cast<long long>(x.n_tokens), static_cast<long long>(n_tokens),
               static_cast<long long>(n_tokens * n_used));
  }
  const int64_t n_expert = w.ne[2], out = w.ne[1], n_slots = n_tokens * n_used;
  // Counting sort of the slots by expert, so each thread walks its weight rows expert by expert.
  scratch.offsets.assign(static_cast<size_t>(n_expert + 1), 0);
  scratch.slots.resize(static_cast<size_t>(n_slots));
  for (int64_t s = 0; s < n_slots; ++s) {
    const int32_t e = ids[s];
    if (e < 0 || e >= n_expert) {
      return err("matmul_id: token %lld slot %lld selects expert %d, but '%s' has %lld experts",
                 static_cast<long long>(s / n_used), static_cast<long long>(s % n_used), e, w.name.c_str(),
                 static_cast<long long>(n_expert));
    }
    scratch.offsets[static_cast<size_t>(e) + 1]++;
  }
  std::vector<int32_t>& off = scratch.offsets;
  for (int64_t e = 0; e < n_expert; ++e) off[e + 1] += off[e];
  scratch.cursor.assign(off.begin(), off.end() - 1);
  for (int64_t s = 0; s < n_slots; ++s)
    scratch.slots[static_cast<size_t>(scratch.cursor[ids[s]]++)] = static_cast<int32_t>(s);
  const int64_t n = x.n;
  const int32_t* slots = scratch.slots.data();
  // Work items: (expert with tokens, block of kRowsPerItem rows), all in one pool region.
  scratch.active.clear();
  for (int64_t e = 0; e < n_expert; ++e)
    if (off[e] != off[e + 1]) scratch.active.push_back(static_cast<int32_t>(e));
  const int64_t row_items = (out + kRowsPerItem - 1) / kRowsPerItem;
  const int32_t* active = scratch.active.data();
  run_items(pool, static_cast<int64_t>(scratch.active.size()) * row_items, [&](int64_t item) {
    const int32_t e = active[item / row_items];
    const int64_t r0 = (item % row_items) * kRowsPerItem, r1 = std::min(out, r0 + kRowsPerItem);
    const int32_t* es = slots + off[e];
    product_rows(
        kt, n, static_cast<const uint8_t*>(w.row(0, e)), w.nb[1], r0, r1, off[e + 1] - off[e],
        [&x, es, per_slot, n_used](int64_t i) { return x.row(per_slot ? es[i] : es[i] / n_used); },
        [y, es, out](int64_t i) { return y + static_cast<int64_t>(es[i]) * out; });
  });
  return Status();
}

Status dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
  const KernelTraits& kt = kernel_traits(type);
  if (!kt.supported()) return err("dequantize_row: type %s is not supported", type_name(type));
  const int64_t bs = type_info(type).block_size;
  if (n < 0 || n % bs != 0) {
    return err("dequantize_row: %lld elements is not a multiple of %s's block size %lld",
               static_cast<long long>(n), type_name(type), static_cast<long long>(bs));
  }
  kt.to_float(src, dst, n);
  return Status();
}

}  // namespace strata
