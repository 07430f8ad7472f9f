// `strata synth`: plan the tensors of an architecture, fill them with seeded random values in
// parallel (each chunk of rows has its own RNG stream, so the bytes do not depend on the thread
// count), quantize row by row, and write one GGUF.
#include "model/synth.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>

#include "base/clock.h"
#include "base/thread_pool.h"
#include "format/gguf.h"
#include "format/tensor_names.h"
#include "model/synth_codes.h"
#include "kernels/traits.h"
#include "model/synth_plan.h"

namespace strata {
namespace synth_detail {

TypeMix parse_type(const std::string& t) {
  TypeMix m;
  if (t == "f32") m.dense = GgmlType::f32;
  if (t == "f16") m.dense = GgmlType::f16;
  if (t == "q8_0" || t == "mxfp4" || t == "nvfp4") m.dense = GgmlType::q8_0;
  if (t == "q4_0") m.dense = GgmlType::q4_0;
  if (t == "q4_k" || t == "q4_k_m") m.dense = GgmlType::q4_k;
  if (t == "q6_k") m.dense = GgmlType::q6_k;
  m.experts = t == "mxfp4" ? GgmlType::mxfp4 : (t == "nvfp4" ? GgmlType::nvfp4 : m.dense);
  m.k_m = t == "q4_k_m";
  return m;
}

// The layers Q4_K_M gives Q6_K attn_v / ffn_down: the first and last eighth, and every third
// layer in between.
static bool more_bits(int layer, int n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

GgmlType matrix_type(const TypeMix& m, bool expert, const std::string& role, int layer, int n_layer) {
  if (!m.k_m) return expert ? m.experts : m.dense;
  if (role == "output") return GgmlType::q6_k;
  if ((role == "attn_v" || role == "ffn_down") && more_bits(layer, n_layer)) return GgmlType::q6_k;
  return GgmlType::q4_k;
}

int64_t mix_block(const TypeMix& m) {
  return std::max({type_info(m.dense).block_size, type_info(m.experts).block_size,
                   m.k_m ? type_info(GgmlType::q6_k).block_size : int64_t{1}});
}

void PlanBuilder::mat(std::string name, GgmlType t, std::vector<int64_t> ne, int layer) {
  const float sc = 1.0f / std::sqrt(static_cast<float>(ne[0]));
  plan->push_back({std::move(name), t, std::move(ne), Init::normal, sc, 0, 0, layer});
}
void PlanBuilder::norm(std::string name, int64_t n, int layer) {
  uniform(std::move(name), {n}, 0.5f, 1.5f, layer);
}
void PlanBuilder::vec(std::string name, std::vector<int64_t> ne, float scale, int layer) {
  plan->push_back({std::move(name), GgmlType::f32, std::move(ne), Init::normal, scale, 0, 0, layer});
}
void PlanBuilder::uniform(std::string name, std::vector<int64_t> ne, float lo, float hi, int layer) {
  plan->push_back({std::move(name), GgmlType::f32, std::move(ne), Init::uniform, 0, lo, hi, layer});
}

}  // namespace synth_detail

namespace {

using synth_detail::Init;
using synth_detail::parse_type;
using synth_detail::TensorPlan;
using synth_detail::TypeMix;

// splitmix64 for seeding (synth_codes'), xoshiro-style stream for values.
using synth_detail::fnv1a;
using synth_detail::mix64;

struct Rng {
  uint64_t s0, s1;
  explicit Rng(uint64_t seed) : s0(mix64(seed)), s1(mix64(seed ^ 0xA5A5A5A5DEADBEEFull)) {}
  uint64_t next() {  // xorshift128+
    uint64_t a = s0;
    const uint64_t b = s1;
    s0 = b;
    a ^= a << 23;
    s1 = a ^ b ^ (a >> 17) ^ (b >> 26);
    return s1 + b;
  }
  float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }  // [0, 1)
  // Two standard normals per call pair (Box-Muller); `spare` caches the second. quantile: N(0, 1)
  // quantiles of 16-bit draws, four per next() (SynthSpec::quantile_draws).
  float normal() {
    if (quantile) {
      if (n_bits == 0) bits = next(), n_bits = 64;
      n_bits -= 16;
      return synth_detail::normal_quantile(static_cast<uint32_t>(bits >> n_bits) & 0xffffu);
    }
    if (has_spare) {
      has_spare = false;
      return spare;
    }
    const float u1 = 1.0f - uniform();  // (0, 1]
    const float u2 = uniform();
    const float r = std::sqrt(-2.0f * std::log(u1));
    spare = r * std::sin(6.28318530718f * u2);
    has_spare = true;
    return r * std::cos(6.28318530718f * u2);
  }
  float spare = 0;
  bool has_spare = false;
  bool quantile = false;
  uint64_t bits = 0;
  int n_bits = 0;
};

int head_dim_of(const SynthSpec& s) {
  return s.head_dim > 0 ? s.head_dim : (s.n_head > 0 ? s.n_embd / s.n_head : 0);
}

// The tensors of the llama-class architectures (qwen3moe, llama, qwen2moe).
void plan_decoder(const SynthSpec& s, const TypeMix& mix, std::vector<TensorPlan>* plan) {
  auto type_of = [&](const std::string& role, int layer, bool expert = false) {
    return matrix_type(mix, expert, role, layer, s.n_layer);
  };
  const int64_t d = s.n_embd, hd = head_dim_of(s), H = s.n_head, KV = s.n_head_kv, V = s.n_vocab;
  const int64_t E = s.n_expert, F = s.arch == "llama" && E == 0 ? s.ffn : s.expert_ffn;
  const int64_t S = s.arch == "qwen2moe" ? (s.shared_ffn > 0 ? s.shared_ffn : s.expert_ffn) : 0;
  synth_detail::PlanBuilder pb{plan};
  plan->push_back({"token_embd.weight", type_of("token_embd", -1), {d, V}, Init::embedding, 1.0f, 0, 0, -1});
  pb.norm("output_norm.weight", d, -1);
  pb.mat("output.weight", type_of("output", -1), {d, V}, -1);
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    pb.norm(b + "attn_norm.weight", d, il);
    pb.mat(b + "attn_q.weight", type_of("attn_q", il), {d, H * hd}, il);
    pb.mat(b + "attn_k.weight", type_of("attn_k", il), {d, KV * hd}, il);
    pb.mat(b + "attn_v.weight", type_of("attn_v", il), {d, KV * hd}, il);
    if (s.arch == "qwen2moe") {
      pb.vec(b + "attn_q.bias", {H * hd}, 0.5f, il);
      pb.vec(b + "attn_k.bias", {KV * hd}, 0.5f, il);
      pb.vec(b + "attn_v.bias", {KV * hd}, 0.5f, il);
    }
    pb.mat(b + "attn_output.weight", type_of("attn_output", il), {H * hd, d}, il);
    if (s.arch == "qwen3moe") {
      pb.norm(b + "attn_q_norm.weight", hd, il);
      pb.norm(b + "attn_k_norm.weight", hd, il);
    }
    pb.norm(b + "ffn_norm.weight", d, il);
    if (E == 0) {
      pb.mat(b + "ffn_gate.weight", type_of("ffn_gate", il), {d, F}, il);
      pb.mat(b + "ffn_up.weight", type_of("ffn_up", il), {d, F}, il);
      pb.mat(b + "ffn_down.weight", type_of("ffn_down", il), {F, d}, il);
      continue;
    }
    plan->push_back({b + kRouterWeight,
                     GgmlType::f32,
                     {d, E},
                     Init::router,
                     1.0f / std::sqrt(static_cast<float>(d)),
                     0,
                     0,
                     il});
    pb.mat(b + kRoutedExpertPartNames[routed_expert_gate], type_of("ffn_gate", il, true), {d, F, E}, il);
    pb.mat(b + kRoutedExpertPartNames[routed_expert_up], type_of("ffn_up", il, true), {d, F, E}, il);
    pb.mat(b + kRoutedExpertPartNames[routed_expert_down], type_of("ffn_down", il, true), {F, d, E}, il);
    if (S > 0) {
      pb.vec(b + "ffn_gate_inp_shexp.weight", {d}, 1.0f / std::sqrt(static_cast<float>(d)), il);
      pb.mat(b + "ffn_gate_shexp.weight", type_of("ffn_gate", il), {d, S}, il);
      pb.mat(b + "ffn_up_shexp.weight", type_of("ffn_up", il), {d, S}, il);
      pb.mat(b + "ffn_down_shexp.weight", type_of("ffn_down", il), {S, d}, il);
    }
  }
}

// general.file_type as llama.cpp numbers it (LLAMA_FTYPE_*); pure Q4_K is its Q4_K_S id.
uint32_t file_type_of(const std::string& t) {
  if (t == "f32") return 0;
  if (t == "f16") return 1;
  if (t == "q4_0") return 2;
  if (t == "q8_0") return 7;
  if (t == "q4_k") return 14;
  if (t == "q4_k_m") return 15;
  if (t == "q6_k") return 18;
  if (t == "nvfp4") return 39;  // LLAMA_FTYPE_MOSTLY_NVFP4
  return 38;                    // MXFP4_MOE
}

}  // namespace

Status synth_validate(const SynthSpec& s) {
  if (s.arch == "deepseek_v41") {
    if (s.n_layer < 1) return err("--layers must be >= 1 (got %d)", s.n_layer);
    if (s.n_head < 1) return err("--heads must be >= 1 (got %d)", s.n_head);
    return synth_validate_deepseek_v41(s);
  }
  if (s.arch != "qwen3moe" && s.arch != "llama" && s.arch != "qwen2moe" && s.arch != "deepseek4") {
    return err("--arch '%s' is not supported (use qwen3moe, llama, qwen2moe, deepseek4 or deepseek_v41)",
               s.arch.c_str());
  }
  const TypeMix mix = parse_type(s.type);
  if (!mix.ok()) {
    return err("--type '%s' is not supported (use f32, f16, q8_0, q4_0, mxfp4, nvfp4, q4_k, q6_k or q4_k_m)",
               s.type.c_str());
  }
  if (s.n_layer < 1) return err("--layers must be >= 1 (got %d)", s.n_layer);
  if (s.fim && s.n_vocab < 265)
    return err("--fim needs --vocab >= 265 (6 more control tokens), got %d", s.n_vocab);
  if (s.n_embd < 2 || s.n_embd % 2) return err("--embd must be even and >= 2 (got %d)", s.n_embd);
  if (s.n_head < 1) return err("--heads must be >= 1 (got %d)", s.n_head);
  if (s.arch == "deepseek4") {
    if (s.n_vocab < 259)
      return err("--vocab must be >= 259 (256 bytes + 3 control tokens), got %d", s.n_vocab);
    if (s.n_vocab > (1 << 21)) return err("--vocab %d is too large", s.n_vocab);
    if (s.n_ctx < 1) return err("--ctx must be >= 1 (got %d)", s.n_ctx);
    if (s.n_expert_used < 1 || s.n_expert_used > s.n_expert)
      return err("--top-k %d must be in [1, --experts %d]", s.n_expert_used, s.n_expert);
    if (s.expert_ffn < 1) return err("--expert-ffn must be >= 1 (got %d)", s.expert_ffn);
    return synth_validate_deepseek4(s);
  }
  if (s.n_head_kv < 1 || s.n_head % s.n_head_kv) {
    return err("--kv-heads %d must be >= 1 and divide --heads %d", s.n_head_kv, s.n_head);
  }
  if (s.head_dim == 0 && s.n_embd % s.n_head) {
    return err("--embd %d is not a multiple of --heads %d (give --head-dim)", s.n_embd, s.n_head);
  }
  const int hd = head_dim_of(s);
  if (hd < 2 || hd % 2) return err("head dim must be even and >= 2 (got %d)", hd);
  if (s.arch == "qwen2moe" && hd * s.n_head != s.n_embd) {
    return err("qwen2moe needs --head-dim = --embd / --heads (%d), got %d", s.n_embd / s.n_head, hd);
  }
  if (s.n_vocab < 259) return err("--vocab must be >= 259 (256 bytes + 3 control tokens), got %d", s.n_vocab);
  if (s.n_vocab > (1 << 21)) return err("--vocab %d is too large", s.n_vocab);
  if (s.n_ctx < 1) return err("--ctx must be >= 1 (got %d)", s.n_ctx);
  const bool moe = s.n_expert > 0;
  if (s.n_expert < 0) return err("--experts must be >= 0 (got %d)", s.n_expert);
  if (!moe && s.arch != "llama") return err("--arch %s needs --experts > 0", s.arch.c_str());
  if (moe) {
    if (s.n_expert_used < 1 || s.n_expert_used > s.n_expert) {
      return err("--top-k %d must be in [1, --experts %d]", s.n_expert_used, s.n_expert);
    }
    if (s.expert_ffn < 1) return err("--expert-ffn must be >= 1 with --experts (got %d)", s.expert_ffn);
  } else if (s.ffn < 1) {
    return err("a dense llama needs --ffn >= 1 (or give --experts)");
  }
  if (s.shared_ffn != 0 && s.arch != "qwen2moe")
    return err("--shared-ffn is only supported for --arch qwen2moe");
  if (s.shared_ffn < 0) return err("--shared-ffn must be >= 0");
  if (!std::isfinite(s.router_skew) || s.router_skew < 0)
    return err("--router-skew must be >= 0 (got %g)", s.router_skew);
  // Quantized rows are whole blocks (32 elements; 256 for the K-quants).
  if (const int64_t bs = mix_block(mix); bs > 1) {
    const char* tn = s.type.c_str();
    const int b = static_cast<int>(bs);
    if (s.n_embd % b) return err("--embd %d must be a multiple of %d for --type %s", s.n_embd, b, tn);
    if ((hd * s.n_head) % b)
      return err("--heads x head dim (%d) must be a multiple of %d for --type %s", hd * s.n_head, b, tn);
    if (moe && s.expert_ffn % b)
      return err("--expert-ffn %d must be a multiple of %d for --type %s", s.expert_ffn, b, tn);
    if (!moe && s.ffn % b) return err("--ffn %d must be a multiple of %d for --type %s", s.ffn, b, tn);
    if (s.shared_ffn % b)
      return err("--shared-ffn %d must be a multiple of %d for --type %s", s.shared_ffn, b, tn);
  }
  return {};
}

Result<SynthInfo> synth_write(const SynthSpec& s, const std::string& path) {
  STRATA_TRY(synth_validate(s));
  if (s.arch == "deepseek_v41") return synth_write_deepseek_v41(s, path);
  const double t0 = now_seconds();
  const TypeMix mix = parse_type(s.type);
  const int64_t d = s.n_embd, hd = head_dim_of(s), H = s.n_head, KV = s.n_head_kv, V = s.n_vocab;
  const int64_t E = s.n_expert, F = s.arch == "llama" && E == 0 ? s.ffn : s.expert_ffn;
  const int64_t S = s.arch == "qwen2moe" ? (s.shared_ffn > 0 ? s.shared_ffn : s.expert_ffn) : 0;
  const bool skew = s.router_skew > 0 && E > 0;

  std::vector<TensorPlan> plan;
  const bool ds4 = s.arch == "deepseek4";
  if (ds4)
    synth_plan_deepseek4(s, &plan);
  else
    plan_decoder(s, mix, &plan);

  // The shared direction u (unit vector) and per-layer router strengths.
  std::vector<float> u(static_cast<size_t>(d));
  {
    Rng r(s.seed ^ 0x0123456789ull);
    double n2 = 0;
    for (auto& x : u) {
      x = r.normal();
      n2 += static_cast<double>(x) * x;
    }
    for (auto& x : u) x = static_cast<float>(x / std::sqrt(n2));
  }
  // After RMSNorm the u component of h is about 0.45·sqrt(d) (embedding offset 0.5·sqrt(d) over
  // a norm of sqrt(1.25·d)). Expert of rank r gets the router logit offset -γ·A·ln(r): with
  // router logits of std ~1, top-k popularity then follows rank^-A roughly (γ = 0.7 measured on
  // d 256, 32 experts, top-4; the top share is capped at 1/k since a token picks k distinct experts).
  const float gamma = 0.7f;
  std::vector<std::vector<float>> strength(static_cast<size_t>(s.n_layer));
  if (skew) {
    for (int il = 0; il < s.n_layer; ++il) {
      std::vector<int> perm(static_cast<size_t>(E));
      for (int e = 0; e < E; ++e) perm[static_cast<size_t>(e)] = e;
      Rng r(s.seed * 1000003ull + static_cast<uint64_t>(il) + 77);
      for (int64_t i = E - 1; i > 0; --i)
        std::swap(perm[static_cast<size_t>(i)], perm[r.next() % static_cast<uint64_t>(i + 1)]);
      auto& st = strength[static_cast<size_t>(il)];
      st.resize(static_cast<size_t>(E));
      for (int rank = 0; rank < E; ++rank) {
        st[static_cast<size_t>(perm[static_cast<size_t>(rank)])] = -gamma * s.router_skew *
                                                                   std::log(static_cast<float>(rank + 1)) /
                                                                   (0.45f * std::sqrt(static_cast<float>(d)));
      }
    }
  }

  // Each tensor is generated when the writer reaches it (one tensor in memory at a time, so a
  // model larger than RAM can be written), its chunks of rows in parallel; every chunk has its own
  // RNG stream, so the bytes do not depend on the thread count.
  uint64_t n_params = 0;
  for (const auto& tp : plan) {
    int64_t n = 1;
    for (int64_t x : tp.ne) n *= x;
    n_params += static_cast<uint64_t>(n);
    if (tp.init != Init::expert_ids && !kernel_traits(tp.type).from_float)
      return err("no quantizer for type %s", type_name(tp.type));
  }
  ThreadPool pool(s.n_threads);
  const float emb_offset = skew ? 0.5f * std::sqrt(static_cast<float>(d)) : 0.0f;
  auto generate = [&](const TensorPlan& tp, uint8_t* data) {
    const int64_t ne0 = tp.ne[0];
    // --draws quantile: an MXFP4 matrix's blocks are drawn as codes (a scale byte and E2M1 pairs
    // from synth_codes' tables), with no quantizer in the loop.
    const bool fp4_codes = s.quantile_draws && tp.type == GgmlType::mxfp4;
    int64_t rows = 1;
    for (size_t k = 1; k < tp.ne.size(); ++k) rows *= tp.ne[k];
    const int64_t per = std::max<int64_t>(1, 65536 / ne0);
    const int64_t n_chunks = (rows + per - 1) / per;
    pool.parallel_for(n_chunks, [&](int64_t c0, int64_t c1) {
      std::vector<float> tmp(static_cast<size_t>(ne0));
      std::vector<int32_t> ids;
      const size_t rb = row_bytes(tp.type, ne0);
      for (int64_t ci = c0; ci < c1; ++ci) {
        const int64_t row0 = ci * per, row1 = std::min(rows, row0 + per);
        Rng rng(s.seed ^ mix64(fnv1a(tp.name)) ^ mix64(static_cast<uint64_t>(row0) + 0x1234567ull));
        rng.quantile = s.quantile_draws;
        for (int64_t r = row0; r < row1; ++r) {
          uint8_t* dst = data + static_cast<size_t>(r) * rb;
          if (tp.init == Init::expert_ids) {  // ne0 distinct ids of [0, scale): a partial shuffle
            const auto n_ids = static_cast<int32_t>(tp.scale);
            ids.resize(static_cast<size_t>(n_ids));
            for (int32_t i = 0; i < n_ids; ++i) ids[static_cast<size_t>(i)] = i;
            for (int64_t i = 0; i < ne0; ++i) {
              const auto j = i + static_cast<int64_t>(rng.next() % static_cast<uint64_t>(n_ids - i));
              std::swap(ids[static_cast<size_t>(i)], ids[static_cast<size_t>(j)]);
            }
            std::memcpy(dst, ids.data(), static_cast<size_t>(ne0) * sizeof(int32_t));
            continue;
          }
          if (fp4_codes && tp.init == Init::normal) {  // --draws quantile: MXFP4 blocks as codes
            const int base = synth_detail::fp4_scale_base(tp.scale);
            for (int64_t b = 0; b < ne0 / 32; ++b) {
              uint8_t* blk = dst + 17 * b;
              blk[0] = synth_detail::ue8m0_code(base, static_cast<uint32_t>(rng.next()));
              for (int k = 0; k < 16; k += 4) {
                const uint64_t q = rng.next();
                for (int j = 0; j < 4; ++j)
                  blk[1 + k + j] = synth_detail::fp4_pair_code(static_cast<uint32_t>(q >> (16 * j)));
              }
            }
            continue;
          }
          for (int64_t i = 0; i < ne0; ++i) {
            float v = 0;
            switch (tp.init) {
              case Init::normal:
              case Init::router:
                v = tp.scale * rng.normal();
                break;
              case Init::uniform:
                v = tp.lo + (tp.hi - tp.lo) * rng.uniform();
                break;
              case Init::embedding:
                v = rng.normal() + emb_offset * u[static_cast<size_t>(i)];
                break;
              case Init::expert_ids:
                break;
            }
            tmp[static_cast<size_t>(i)] = v;
          }
          if (tp.init == Init::router && skew) {
            // Remove the row's random component along u, so the only u-dependence (and with it the
            // only shared per-expert bias) is the rank strength.
            double dot = 0;
            for (int64_t i = 0; i < ne0; ++i)
              dot += static_cast<double>(tmp[static_cast<size_t>(i)]) * u[static_cast<size_t>(i)];
            const float k =
                strength[static_cast<size_t>(tp.layer)][static_cast<size_t>(r % E)] - static_cast<float>(dot);
            for (int64_t i = 0; i < ne0; ++i) tmp[static_cast<size_t>(i)] += k * u[static_cast<size_t>(i)];
          }
          kernel_traits(tp.type).from_float(tmp.data(), dst, ne0);
        }
      }
    });
  };

  GgufWriter w;
  const std::string& a = s.arch;
  SynthVocab vocab = synth_vocab(s.n_vocab, s.arch, s.fim);
  w.set_string("general.architecture", a);
  w.set_string("general.name",
               "synth-" + a + "-L" + std::to_string(s.n_layer) + "-d" + std::to_string(d) +
                   (E ? "-E" + std::to_string(E) + "k" + std::to_string(s.n_expert_used) : "") + "-" +
                   s.type);
  char desc[160];
  std::snprintf(desc, sizeof desc, "random weights (strata synth) seed=%llu router_skew=%g type=%s",
                static_cast<unsigned long long>(s.seed), s.router_skew, s.type.c_str());
  w.set_string("general.description", desc);
  w.set_u32("general.file_type", file_type_of(s.type));
  w.set_u32(a + ".context_length", static_cast<uint32_t>(s.n_ctx));
  w.set_u32(a + ".embedding_length", static_cast<uint32_t>(d));
  w.set_u32(a + ".block_count", static_cast<uint32_t>(s.n_layer));
  w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(E ? (a == "llama" ? F : S > 0 ? S : F) : F));
  w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(H));
  if (ds4) {
    synth_meta_deepseek4(s, w);
  } else {
    w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(KV));
    w.set_u32(a + ".attention.key_length", static_cast<uint32_t>(hd));
    w.set_u32(a + ".attention.value_length", static_cast<uint32_t>(hd));
    w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(hd));
  }
  w.set_f32(a + ".rope.freq_base", s.rope_base);
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", s.rms_eps);
  if (E > 0) {
    w.set_u32(a + ".expert_count", static_cast<uint32_t>(E));
    w.set_u32(a + ".expert_used_count", static_cast<uint32_t>(s.n_expert_used));
    if (a != "llama") w.set_u32(a + ".expert_feed_forward_length", static_cast<uint32_t>(F));
    if (S > 0) w.set_u32(a + ".expert_shared_feed_forward_length", static_cast<uint32_t>(S));
  }
  if (a == "llama") w.set_u32(a + ".vocab_size", static_cast<uint32_t>(V));
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", vocab.pre);
  w.set_array_string("tokenizer.ggml.tokens", vocab.tokens);
  w.set_array_i32("tokenizer.ggml.token_type", vocab.types);
  w.set_array_string("tokenizer.ggml.merges", vocab.merges);
  w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(vocab.bos));
  w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(vocab.eos));
  w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(vocab.bos));
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  if (s.fim) {
    const std::pair<const char*, int32_t> fim[] = {{"pre", vocab.fim_pre}, {"suf", vocab.fim_suf},
                                                   {"mid", vocab.fim_mid}, {"pad", vocab.fim_pad},
                                                   {"rep", vocab.fim_rep}, {"sep", vocab.fim_sep}};
    for (const auto& [k, id] : fim)
      w.set_u32(std::string("tokenizer.ggml.fim_") + k + "_token_id", static_cast<uint32_t>(id));
  }
  w.set_string(
      "tokenizer.chat_template",
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
      "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
      "{% endif %}");
  for (const TensorPlan& tp : plan) {
    STRATA_TRY(w.add_tensor(tp.name, tp.type, tp.ne, [&generate, &tp](uint8_t* dst, size_t) -> Status {
      generate(tp, dst);
      return {};
    }));
  }
  STRATA_TRY(w.write(path));

  SynthInfo info;
  info.n_params = n_params;
  info.n_tensors = static_cast<int>(plan.size());
  std::error_code ec;
  info.n_bytes = std::filesystem::file_size(path, ec);
  info.seconds = now_seconds() - t0;
  return info;
}

}  // namespace strata
