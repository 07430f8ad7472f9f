#include "model/deepseek_v41/v41_weights.h"

#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "model/deepseek_v41/v41_ckpt_quant.h"
#include "quant/fp8_fp4.h"
#include "quant/qtypes.h"

namespace strata::v41 {

namespace {

struct Binder {
  explicit Binder(const SafetensorsDir& dir) : d(dir) {}
  const SafetensorsDir& d;
  int block_r = 128, block_c = 128;  // FP8 weight_block_size
  size_t n = 0;
  uint64_t bytes = 0;

  std::string expect_str(StDtype t, const std::vector<int64_t>& shape) const {
    StTensor e;
    e.dtype = t;
    e.shape = shape;
    return e.shape_string();
  }

  // With the routed experts streamed (the expert store reads them with O_DIRECT), the mapped pages
  // of a tensor that has been copied out leave this process as soon as it is (they fault back in if
  // read again): the load's peak resident set is the converted weights, not the shards as well (the
  // shards' pages are dropped whole after the load too: arch_deepseek_v41.cpp).
  bool drop_mapped = false;

  Status get(const std::string& name, StDtype t, std::vector<int64_t> shape, std::vector<float>* out) {
    const Status s = get_copy(name, t, std::move(shape), out);
    if (drop_mapped) {
      d.drop_resident_pages(name);
      d.drop_resident_pages(scale_name_of(name));  // an FP8 / FP4 weight's scales (absent: nothing)
    }
    return s;
  }
  Status get_copy(const std::string& name, StDtype t, std::vector<int64_t> shape, std::vector<float>* out) {
    const StTensor* st = d.find(name);
    if (!st)
      return err("checkpoint %s: tensor '%s' is missing (expected %s)", d.dir().c_str(), name.c_str(),
                 expect_str(t, shape).c_str());
    if ((st->dtype != t || st->shape != shape) && converted(*st, name, t, shape, out)) {
      if (!conv_status.ok()) return conv_status;
      ++n;
      return {};
    }
    if (st->dtype != t || st->shape != shape)
      return err("checkpoint %s: %s: tensor '%s': expected %s, got %s", d.dir().c_str(),
                 d.file_of(name).c_str(), name.c_str(), expect_str(t, shape).c_str(),
                 st->shape_string().c_str());
    const int64_t ne = st->numel();
    out->resize(static_cast<size_t>(ne));
    if (t == StDtype::f32) {
      std::memcpy(out->data(), st->data, static_cast<size_t>(ne) * 4);
    } else {
      for (int64_t i = 0; i < ne; ++i) {
        uint16_t h;
        std::memcpy(&h, st->data + 2 * i, 2);
        (*out)[static_cast<size_t>(i)] = bf16_to_f32(h);
      }
    }
    for (float v : *out)
      if (!std::isfinite(v))
        return err("checkpoint %s: %s: tensor '%s' holds a non-finite value", d.dir().c_str(),
                   d.file_of(name).c_str(), name.c_str());
    ++n;
    return {};
  }
  // The checkpoint's FP8 / FP4 encodings of a BF16 matrix, F8 Engram tables where F32 is expected
  // (v41_ckpt_quant.h), and BF16 where F32 is expected (the official head.weight; widened exactly). Returns
  // false if `st` is none of them; else the conversion's status is in conv_status.
  Status conv_status;
  bool converted(const StTensor& st, const std::string& name, StDtype t, const std::vector<int64_t>& shape,
                 std::vector<float>* out) {
    const std::string where = "checkpoint " + d.dir() + ": " + d.file_of(name);
    const bool fp8 = st.dtype == StDtype::f8_e4m3, fp4 = st.dtype == StDtype::i8 || st.dtype == StDtype::u8;
    if (t == StDtype::bf16 && shape.size() == 2 && (fp8 || fp4)) {
      const std::string sname = scale_name_of(name);
      const StTensor* sc = d.find(sname);
      if (!sc) {
        conv_status = err("%s: %s weight '%s' needs its scale tensor '%s', which is missing", where.c_str(),
                          fp8 ? "FP8" : "FP4", name.c_str(), sname.c_str());
        return true;
      }
      conv_status = fp8 ? dequant_fp8_blocks(st, *sc, shape[0], shape[1], block_r, block_c, where, out)
                        : dequant_fp4_mx(st, *sc, shape[0], shape[1], where, out);
      return true;
    }
    if (t == StDtype::f32 && st.shape == shape && st.dtype == StDtype::bf16) {  // head.weight as shipped
      out->resize(static_cast<size_t>(st.numel()));
      for (int64_t i = 0; i < st.numel(); ++i) {
        uint16_t h;
        std::memcpy(&h, st.data + 2 * i, 2);
        (*out)[static_cast<size_t>(i)] = bf16_to_f32(h);
      }
      conv_status = {};
      for (float v : *out)
        if (!std::isfinite(v))
          conv_status = err("%s: tensor '%s' holds a non-finite value", where.c_str(), name.c_str());
      return true;
    }
    if (t == StDtype::f32 && st.shape == shape && (fp8 || st.dtype == StDtype::f8_e8m0)) {
      if (fp8)
        decode_e4m3(st, out);
      else
        decode_ue8m0(st, out);
      conv_status = {};
      for (float v : *out)
        if (!std::isfinite(v))
          conv_status = err("%s: tensor '%s' holds a NaN code", where.c_str(), name.c_str());
      return true;
    }
    return false;
  }
  // fast: the matrix is packed (v41_weights.h) unless keep_f32 (read element-wise by the forward).
  bool fast = false;
  Status mat(const std::string& name, StDtype t, int64_t rows, int64_t cols, Mat* m, bool keep_f32 = false) {
    m->rows = rows;
    m->cols = cols;
    STRATA_TRY(get(name, t, {rows, cols}, &m->w));
    if (fast && !keep_f32) {
      pack(m->w, rows, cols, m);
      std::vector<float>().swap(m->w);  // `w = {}` would keep the capacity: an f32 copy of every matrix
    }
    bytes += static_cast<uint64_t>(m->w.size()) * sizeof(float) + m->bytes.size();
    return {};
  }
  Status vec(const std::string& name, StDtype t, int64_t len, std::vector<float>* v) {
    STRATA_TRY(get(name, t, {len}, v));
    bytes += static_cast<uint64_t>(v->size()) * sizeof(float);
    return {};
  }
  // An Engram table (values on the E4M3 grid, or their power-of-two scales) in fast mode: one
  // byte per value (E4M3 / UE8M0 codes, the checkpoint's own encodings) when every value has one,
  // else f32 as in oracle mode. ResidentEngramRows decodes the bytes (v41_engram.cpp).
  Status table(const std::string& name, int64_t rows, int64_t cols, bool scales, Mat* m) {
    STRATA_TRY(mat(name, StDtype::f32, rows, cols, m, /*keep_f32=*/true));
    if (!fast) return {};
    std::vector<uint8_t> codes(m->w.size());
    for (size_t i = 0; i < codes.size(); ++i) {
      const float v = m->w[i];
      codes[i] = scales ? ue8m0_ceil_code(v) : f32_to_e4m3(v);
      if ((scales ? ue8m0_to_f32(codes[i]) : e4m3_to_f32(codes[i])) != v) return {};  // keep f32
    }
    bytes -= static_cast<uint64_t>(m->w.size()) * sizeof(float);
    bytes += codes.size();
    m->bytes = std::move(codes);
    std::vector<float>().swap(m->w);
    return {};
  }
  // A matrix [rows][cols] of f32 values -> BF16 when every value is bf16-exact (lossless), else
  // F32; m->tv views it ({cols, rows}).
  static void pack(const std::vector<float>& src, int64_t rows, int64_t cols, Mat* m) {
    bool exact = true;
    for (float x : src) exact = exact && bf16_to_f32(f32_to_bf16(x)) == x;
    const size_t per = static_cast<size_t>(rows * cols);
    if (exact) {
      m->bytes.resize(per * 2);
      for (size_t i = 0; i < per; ++i) {
        const uint16_t h = f32_to_bf16(src[i]);
        std::memcpy(m->bytes.data() + 2 * i, &h, 2);
      }
    } else {
      m->bytes.resize(per * 4);
      std::memcpy(m->bytes.data(), src.data(), per * 4);
    }
    view(exact ? GgmlType::bf16 : GgmlType::f32, rows, cols, 1, m);
  }
  static void view(GgmlType t, int64_t rows, int64_t cols, int64_t n_exp, Mat* m) {
    m->rows = rows;
    m->cols = cols;
    m->tv = TensorView{};
    m->tv.type = t;
    m->tv.n_dims = n_exp > 1 ? 3 : 2;
    m->tv.ne[0] = cols;
    m->tv.ne[1] = rows;
    m->tv.ne[2] = n_exp;
    tensor_view_set_contiguous(&m->tv);
    m->tv.data = m->bytes.data();
  }
  // The routed experts' `which` ("w1", "w3", "w2") of layer prefix f, stacked: MXFP4 when every
  // expert is FP4 in the checkpoint, else packed as above.
  Status experts(const std::string& f, const char* which, int64_t E, int64_t rows, int64_t cols, Mat* m) {
    auto name = [&](int64_t e) { return f + "experts." + std::to_string(e) + "." + which + ".weight"; };
    bool fp4 = cols % 32 == 0;
    for (int64_t e = 0; e < E && fp4; ++e) {
      const StTensor* st = d.find(name(e));
      fp4 = st && (st->dtype == StDtype::i8 || st->dtype == StDtype::u8) && d.find(scale_name_of(name(e)));
    }
    if (fp4) {
      const size_t per = static_cast<size_t>(rows * cols / 32) * sizeof(BlockMxfp4);
      m->bytes.resize(per * static_cast<size_t>(E));
      for (int64_t e = 0; e < E; ++e) {
        const std::string where = "checkpoint " + d.dir() + ": " + d.file_of(name(e));
        STRATA_TRY(fp4_to_mxfp4(*d.find(name(e)), *d.find(scale_name_of(name(e))), rows, cols, where,
                                m->bytes.data() + per * static_cast<size_t>(e)));
        ++n;
      }
      view(GgmlType::mxfp4, rows, cols, E, m);
    } else {
      // One expert's f32 values at a time: BF16 while every value is bf16-exact, else (rare) the
      // whole stack again as F32.
      const size_t per = static_cast<size_t>(rows * cols);
      std::vector<float> v;
      for (GgmlType t : {GgmlType::bf16, GgmlType::f32}) {
        const size_t es = t == GgmlType::bf16 ? 2 : 4;
        m->bytes.assign(per * es * static_cast<size_t>(E), 0);
        bool ok = true;
        size_t got = 0;
        for (int64_t e = 0; e < E && ok; ++e, ++got) {
          STRATA_TRY(get(name(e), StDtype::bf16, {rows, cols}, &v));
          uint8_t* dst = m->bytes.data() + per * es * static_cast<size_t>(e);
          if (t == GgmlType::f32) {
            std::memcpy(dst, v.data(), per * 4);
            continue;
          }
          for (size_t i = 0; i < per && ok; ++i) {
            const uint16_t h = f32_to_bf16(v[i]);
            ok = bf16_to_f32(h) == v[i];
            std::memcpy(dst + 2 * i, &h, 2);
          }
        }
        if (!ok) {
          n -= got;  // counted again by the F32 pass
          continue;
        }
        view(t, rows, cols, E, m);
        break;
      }
    }
    bytes += m->bytes.size();
    return {};
  }
};

constexpr StDtype BF = StDtype::bf16;
constexpr StDtype F32 = StDtype::f32;

}  // namespace

Result<Weights> bind_weights(const SafetensorsDir& d, const Config& c, bool engram_tables, bool fast,
                             bool routed_experts) {
  Binder b(d);
  b.fast = fast;
  b.drop_mapped = !routed_experts;
  b.block_r = c.fp8_block_r;
  b.block_c = c.fp8_block_c;
  Weights w;
  const int64_t D = c.dim, V = c.vocab, H = c.n_heads, hd = c.head_dim, Q = c.q_lora, G = c.o_groups,
                R = c.o_lora, E = c.n_experts, I = c.moe_inter, hc = c.hc, nmix = (2 + hc) * hc;
  STRATA_TRY(b.mat("embed.weight", BF, V, D, &w.embed));
  STRATA_TRY(b.mat("head.weight", F32, V, D, &w.head));
  STRATA_TRY(b.vec("norm.weight", BF, D, &w.norm));
  w.layers.resize(static_cast<size_t>(c.n_layers));
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    const LayerCfg& lc = c.layers[l];
    LayerW& L = w.layers[l];
    STRATA_TRY(b.mat(p + "hc_attn_fn", F32, nmix, hc * D, &L.hc_attn.fn));
    STRATA_TRY(b.mat(p + "hc_ffn_fn", F32, nmix, hc * D, &L.hc_ffn.fn));
    STRATA_TRY(b.vec(p + "hc_attn_base", F32, nmix, &L.hc_attn.base));
    STRATA_TRY(b.vec(p + "hc_ffn_base", F32, nmix, &L.hc_ffn.base));
    STRATA_TRY(b.vec(p + "hc_attn_scale", F32, 3, &L.hc_attn.scale));
    STRATA_TRY(b.vec(p + "hc_ffn_scale", F32, 3, &L.hc_ffn.scale));
    STRATA_TRY(b.vec(p + "attn_norm.weight", BF, D, &L.attn_norm));
    STRATA_TRY(b.vec(p + "ffn_norm.weight", BF, D, &L.ffn_norm));
    const std::string a = p + "attn.";
    STRATA_TRY(b.vec(a + "attn_sink", F32, H, &L.attn_sink));
    STRATA_TRY(b.mat(a + "wq_a.weight", BF, Q, D, &L.wq_a));
    STRATA_TRY(b.vec(a + "q_norm.weight", BF, Q, &L.q_norm));
    STRATA_TRY(b.mat(a + "wq_b.weight", BF, H * hd, Q, &L.wq_b));
    STRATA_TRY(b.mat(a + "wkv.weight", BF, hd, D, &L.wkv));
    STRATA_TRY(b.vec(a + "kv_norm.weight", BF, hd, &L.kv_norm));
    STRATA_TRY(b.mat(a + "wo_a.weight", BF, G * R, H * hd / G, &L.wo_a));
    STRATA_TRY(b.mat(a + "wo_b.weight", BF, D, G * R, &L.wo_b));
    if (lc.kv_source) {
      STRATA_TRY(b.mat(a + "compressor.wkv.weight", lc.ratio > 1 ? F32 : BF, hd, D, &L.c_wkv));
      if (lc.ratio > 1) STRATA_TRY(b.mat(a + "compressor.wgate.weight", F32, hd, D, &L.c_wgate));
      STRATA_TRY(b.vec(a + "compressor.norm.weight", BF, hd, &L.c_norm));
    }
    if (lc.index_source) {
      STRATA_TRY(b.mat(a + "indexer.wq_b.weight", BF, int64_t{c.idx_heads} * c.idx_dim, Q, &L.i_wq_b));
      STRATA_TRY(b.mat(a + "indexer.weights_proj.weight", BF, c.idx_heads, D, &L.i_wproj));
      if (lc.owns_index_k) {
        STRATA_TRY(b.mat(a + "indexer.wk.weight", BF, c.idx_dim, hd, &L.i_wk));
        STRATA_TRY(b.vec(a + "indexer.k_norm.weight", BF, c.idx_dim, &L.i_knorm));
      }
    }
    const std::string f = p + "ffn.";
    STRATA_TRY(b.mat(f + "gate.weight", BF, E, D, &L.gate));
    STRATA_TRY(b.vec(f + "gate.bias", F32, E, &L.gate_bias));
    if (fast && routed_experts) {
      STRATA_TRY(b.experts(f, "w1", E, I, D, &L.xw1));
      STRATA_TRY(b.experts(f, "w3", E, I, D, &L.xw3));
      STRATA_TRY(b.experts(f, "w2", E, D, I, &L.xw2));
    }
    if (!fast) {
      L.w1.resize(static_cast<size_t>(E));
      L.w2.resize(static_cast<size_t>(E));
      L.w3.resize(static_cast<size_t>(E));
    }
    for (int64_t e = 0; e < E && !fast; ++e) {
      const std::string x = f + "experts." + std::to_string(e) + ".";
      STRATA_TRY(b.mat(x + "w1.weight", BF, I, D, &L.w1[e]));
      STRATA_TRY(b.mat(x + "w3.weight", BF, I, D, &L.w3[e]));
      STRATA_TRY(b.mat(x + "w2.weight", BF, D, I, &L.w2[e]));
    }
    STRATA_TRY(b.mat(f + "shared_experts.w1.weight", BF, I, D, &L.sw1));
    STRATA_TRY(b.mat(f + "shared_experts.w3.weight", BF, I, D, &L.sw3));
    STRATA_TRY(b.mat(f + "shared_experts.w2.weight", BF, D, I, &L.sw2));
    if (lc.engram >= 0) {
      const std::string g = p + "engram.";
      const int64_t rows = c.engram_rows[static_cast<size_t>(lc.engram)], hdim = c.engram_head_dim;
      if (engram_tables) {
        STRATA_TRY(b.table(g + "embed.weight", rows, hdim, /*scales=*/false, &L.e_embed));
        STRATA_TRY(b.table(g + "embed.scale", rows, hdim / 32, /*scales=*/true, &L.e_scale));
      }
      STRATA_TRY(b.mat(g + "wkv.weight", BF, D * (hc + 1), int64_t{c.n_hash_cols()} * hdim, &L.e_wkv));
      STRATA_TRY(b.mat(g + "q_weight", BF, hc, D, &L.e_q, true));
      STRATA_TRY(b.mat(g + "k_weight", BF, hc, D, &L.e_k, true));
    }
  }
  w.n_tensors = b.n;
  w.bytes = b.bytes;
  return w;
}

}  // namespace strata::v41
