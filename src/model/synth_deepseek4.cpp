// `strata synth --arch deepseek4`: the tensors and metadata of a DeepSeek-V4 GGUF as llama.cpp
// v0.5.0's converter writes them (../shared/docs/deepseek-v4.md §6.2-6.4): mHC sites, the grouped
// low-rank output projection, compressors on ratio-4 / ratio-128 layers, the lightning indexer on
// ratio-4 layers, hash-routed first layers, sqrt-softplus routing with a selection bias.
// Loadable by strata (model/deepseek4) and by llama.cpp.
#include <algorithm>
#include <cmath>
#include <string>

#include "format/gguf.h"
#include "format/tensor_names.h"
#include "model/synth_plan.h"

namespace strata {
namespace {

using synth_detail::Init;
using synth_detail::PlanBuilder;
using synth_detail::TensorPlan;

constexpr int kHc = 4;  // mHC streams (the loaders accept only 4)

std::vector<int> ratios_of(const SynthSpec& s) {
  if (!s.compress_ratios.empty()) return s.compress_ratios;
  std::vector<int> r(static_cast<size_t>(s.n_layer), 0);
  for (int il = 2; il < s.n_layer; ++il) r[static_cast<size_t>(il)] = il % 2 == 0 ? 4 : 128;
  return r;
}

int n_hash_of(const SynthSpec& s) {
  return std::min(s.hash_layers, s.n_layer);
}

}  // namespace

SynthSpec synth_preset_v4_flash(int n_layer) {
  SynthSpec s;
  s.arch = "deepseek4";
  s.n_layer = n_layer;
  s.n_embd = 4096;
  s.n_head = 64;
  s.n_head_kv = 1;
  s.head_dim = 512;
  s.rope_dim = 64;
  s.q_lora = 1024;
  s.out_groups = 8;
  s.out_lora = 1024;
  s.window = 128;
  s.n_expert = 256;
  s.n_expert_used = 6;
  s.expert_ffn = 2048;
  s.indexer_heads = 64;
  s.indexer_dim = 128;
  s.indexer_topk = 512;
  s.hash_layers = 3;
  s.n_vocab = 129280;
  s.rope_base = 10000.0f;
  s.type = "mxfp4";
  return s;
}

Status synth_validate_deepseek4(const SynthSpec& s) {
  if (s.n_head_kv != 1)
    return err("--kv-heads must be 1 for deepseek4 (K = V, one shared head), got %d", s.n_head_kv);
  if (s.head_dim < 2 || s.head_dim % 2)
    return err("deepseek4 needs an even --head-dim >= 2 (got %d)", s.head_dim);
  if (s.rope_dim < 2 || s.rope_dim % 2 || s.rope_dim > s.head_dim)
    return err("--rope-dim %d must be even, >= 2 and <= --head-dim %d", s.rope_dim, s.head_dim);
  if (s.q_lora < 1) return err("deepseek4 needs --q-lora >= 1 (got %d)", s.q_lora);
  if (s.out_groups < 1 || s.n_head % s.out_groups)
    return err("--out-groups %d must be >= 1 and divide --heads %d", s.out_groups, s.n_head);
  if (s.out_lora < 1) return err("deepseek4 needs --out-lora >= 1 (got %d)", s.out_lora);
  if (s.window < 1) return err("--window must be >= 1 (got %d)", s.window);
  if (s.n_expert < 1) return err("deepseek4 needs --experts >= 1");
  if (!s.compress_ratios.empty() && static_cast<int>(s.compress_ratios.size()) != s.n_layer)
    return err("--compress-ratios has %zu entries, --layers is %d", s.compress_ratios.size(), s.n_layer);
  bool csa = false;
  for (int r : ratios_of(s)) {
    if (r != 0 && r != 4 && r != 128) return err("--compress-ratios: %d is not one of 0, 4, 128", r);
    csa = csa || r == 4;
  }
  if (s.hash_layers < 0) return err("--hash-layers must be >= 0 (got %d)", s.hash_layers);
  if (csa && (s.indexer_heads < 1 || s.indexer_dim < s.rope_dim || s.indexer_dim % 2 || s.indexer_topk < 1))
    return err(
        "ratio-4 layers need --indexer-heads >= 1, an even --indexer-dim >= --rope-dim %d and "
        "--indexer-topk >= 1 (got %d, %d, %d)",
        s.rope_dim, s.indexer_heads, s.indexer_dim, s.indexer_topk);
  if (!std::isfinite(s.swiglu_clamp) || s.swiglu_clamp <= 0)
    return err("--swiglu-clamp must be > 0 (got %g)", s.swiglu_clamp);
  if (s.router_skew != 0) return err("--router-skew is not supported for deepseek4");
  // Every matrix's row (ne[0]) must be whole blocks of its type.
  const int64_t bs = synth_detail::mix_block(synth_detail::parse_type(s.type));
  if (bs > 1) {
    const int64_t gin = int64_t{s.n_head} * s.head_dim / s.out_groups;
    const struct {
      const char* what;
      int64_t n;
    } rows[] = {{"--embd", s.n_embd},
                {"--q-lora", s.q_lora},
                {"--heads x --head-dim / --out-groups", gin},
                {"--out-groups x --out-lora", int64_t{s.out_groups} * s.out_lora},
                {"--expert-ffn", s.expert_ffn}};
    for (const auto& r : rows)
      if (r.n % bs)
        return err("%s (%lld) must be a multiple of %lld for --type %s", r.what, static_cast<long long>(r.n),
                   static_cast<long long>(bs), s.type.c_str());
  }
  return {};
}

void synth_plan_deepseek4(const SynthSpec& s, std::vector<TensorPlan>* plan) {
  const synth_detail::TypeMix mix = synth_detail::parse_type(s.type);
  auto type_of = [&](const std::string& role, int layer, bool expert = false) {
    return synth_detail::matrix_type(mix, expert, role, layer, s.n_layer);
  };
  PlanBuilder pb{plan};
  const int64_t d = s.n_embd, H = s.n_head, hd = s.head_dim, V = s.n_vocab, E = s.n_expert;
  const int64_t F = s.expert_ffn, G = s.out_groups, hcd = int64_t{kHc} * d, n_mix = (2 + kHc) * kHc;
  const std::vector<int> ratios = ratios_of(s);
  const float hc_scale = 1.0f / std::sqrt(static_cast<float>(hcd));
  plan->push_back({"token_embd.weight", type_of("token_embd", -1), {d, V}, Init::embedding, 1.0f, 0, 0, -1});
  pb.norm("output_norm.weight", d, -1);
  pb.mat("output.weight", type_of("output", -1), {d, V}, -1);
  pb.vec("output_hc_fn.weight", {hcd, kHc}, hc_scale, -1);
  pb.vec("output_hc_base.weight", {kHc}, 0.5f, -1);
  pb.uniform("output_hc_scale.weight", {1}, 0.5f, 1.5f, -1);
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    for (const char* site : {"attn", "ffn"}) {
      const std::string p = b + "hc_" + site + "_";
      pb.vec(p + "fn.weight", {hcd, n_mix}, hc_scale, il);
      pb.vec(p + "base.weight", {n_mix}, 0.5f, il);
      pb.uniform(p + "scale.weight", {3}, 0.5f, 1.5f, il);
    }
    pb.norm(b + "attn_norm.weight", d, il);
    pb.vec(b + "attn_sinks.weight", {H}, 1.0f, il);
    pb.mat(b + "attn_q_a.weight", type_of("attn_q", il), {d, s.q_lora}, il);
    pb.norm(b + "attn_q_a_norm.weight", s.q_lora, il);
    pb.mat(b + "attn_q_b.weight", type_of("attn_q", il), {s.q_lora, H * hd}, il);
    pb.mat(b + "attn_kv.weight", type_of("attn_k", il), {d, hd}, il);
    pb.norm(b + "attn_kv_a_norm.weight", hd, il);
    pb.mat(b + "attn_output_a.weight", type_of("attn_output", il), {H * hd / G, G * s.out_lora}, il);
    pb.mat(b + "attn_output_b.weight", type_of("attn_output", il), {G * s.out_lora, d}, il);
    const int r = ratios[static_cast<size_t>(il)];
    auto compressor = [&](const std::string& p, int64_t width, int64_t coff, int ratio) {
      pb.mat(b + p + "_kv.weight", type_of("attn_k", il), {d, coff * width}, il);
      pb.mat(b + p + "_gate.weight", type_of("attn_k", il), {d, coff * width}, il);
      pb.vec(b + p + "_ape.weight", {coff * width, ratio}, 0.5f, il);
      pb.norm(b + p + "_norm.weight", width, il);
    };
    if (r != 0) compressor("attn_compressor", hd, r == 4 ? 2 : 1, r);
    if (r == 4) {
      pb.mat(b + "indexer.proj.weight", type_of("attn_q", il), {d, s.indexer_heads}, il);
      pb.mat(b + "indexer.attn_q_b.weight", type_of("attn_q", il),
             {s.q_lora, int64_t{s.indexer_heads} * s.indexer_dim}, il);
      compressor("indexer_compressor", s.indexer_dim, 2, 4);
    }
    pb.norm(b + "ffn_norm.weight", d, il);
    pb.mat(b + kRouterWeight, GgmlType::f32, {d, E}, il);
    if (il < n_hash_of(s))
      plan->push_back({b + "ffn_gate_tid2eid.weight",
                       GgmlType::i32,
                       {s.n_expert_used, V},
                       Init::expert_ids,
                       static_cast<float>(E),
                       0,
                       0,
                       il});
    else
      pb.vec(b + "exp_probs_b.bias", {E}, 0.1f, il);
    pb.mat(b + kRoutedExpertPartNames[routed_expert_gate], type_of("ffn_gate", il, true), {d, F, E}, il);
    pb.mat(b + kRoutedExpertPartNames[routed_expert_up], type_of("ffn_up", il, true), {d, F, E}, il);
    pb.mat(b + kRoutedExpertPartNames[routed_expert_down], type_of("ffn_down", il, true), {F, d, E}, il);
    pb.mat(b + "ffn_gate_shexp.weight", type_of("ffn_gate", il), {d, F}, il);
    pb.mat(b + "ffn_up_shexp.weight", type_of("ffn_up", il), {d, F}, il);
    pb.mat(b + "ffn_down_shexp.weight", type_of("ffn_down", il), {F, d}, il);
  }
}

void synth_meta_deepseek4(const SynthSpec& s, GgufWriter& w) {
  const std::string a = "deepseek4.";
  const std::vector<int> ratios = ratios_of(s);
  w.set_u32(a + "attention.head_count_kv", 1);
  w.set_u32(a + "attention.key_length", static_cast<uint32_t>(s.head_dim));
  w.set_u32(a + "attention.value_length", static_cast<uint32_t>(s.head_dim));
  w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(s.rope_dim));
  w.set_string(a + "rope.scaling.type", "yarn");
  w.set_f32(a + "rope.scaling.factor", 16.0f);
  w.set_u32(a + "rope.scaling.original_context_length", 65536);
  w.set_f32(a + "rope.scaling.yarn_beta_fast", 32.0f);
  w.set_f32(a + "rope.scaling.yarn_beta_slow", 1.0f);
  w.set_u32(a + "expert_gating_func", 4);  // sqrt-softplus
  w.set_u32(a + "attention.q_lora_rank", static_cast<uint32_t>(s.q_lora));
  w.set_u32(a + "attention.sliding_window", static_cast<uint32_t>(s.window));
  w.set_u32(a + "expert_shared_count", 1);
  w.set_f32(a + "expert_weights_scale", 1.5f);
  w.set_bool(a + "expert_weights_norm", true);
  w.set_array_f32(a + "swiglu_clamp_exp", std::vector<float>(static_cast<size_t>(s.n_layer), s.swiglu_clamp));
  w.set_array_f32(a + "swiglu_clamp_shexp",
                  std::vector<float>(static_cast<size_t>(s.n_layer), s.swiglu_clamp));
  w.set_u32(a + "attention.indexer.head_count", static_cast<uint32_t>(std::max(1, s.indexer_heads)));
  w.set_u32(a + "attention.indexer.key_length", static_cast<uint32_t>(std::max(s.rope_dim, s.indexer_dim)));
  w.set_u32(a + "attention.indexer.top_k", static_cast<uint32_t>(std::max(1, s.indexer_topk)));
  w.set_u32(a + "attention.output_group_count", static_cast<uint32_t>(s.out_groups));
  w.set_u32(a + "attention.output_lora_rank", static_cast<uint32_t>(s.out_lora));
  w.set_array_i32(a + "attention.compress_ratios", std::vector<int32_t>(ratios.begin(), ratios.end()));
  w.set_f32(a + "attention.compress_rope_freq_base", 160000.0f);
  w.set_u32(a + "hyper_connection.count", kHc);
  w.set_u32(a + "hyper_connection.sinkhorn_iterations", 20);
  w.set_f32(a + "hyper_connection.epsilon", 1e-6f);
  w.set_u32(a + "hash_layer_count", static_cast<uint32_t>(n_hash_of(s)));
  w.set_u32(a + "embedding_length_out", static_cast<uint32_t>(kHc * s.n_embd));
}

}  // namespace strata
