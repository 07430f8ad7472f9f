// `strata synth --arch deepseek_v41`: a DeepSeek-V4.1 checkpoint directory in the official layout
// (../shared/docs/deepseek-v4.md §3.2, §4; fixtures-v41 README): config.json (upstream ModelArgs
// keys, quantization_config FP8 with 32 x 32 UE8M0 blocks), sharded safetensors with
// model.safetensors.index.json — dense Linears FP8 E4M3 + `.scale` blocks, routed experts FP4
// (E2M1 pairs, I8) + UE8M0 per 32, Engram tables E4M3 + UE8M0 per 32, embed / head / norms / router
// BF16, mHC / sinks / ratio-2 compressors / gate.bias F32 — engram_meta.json, and a tokenizer.json
// (+ tokenizer_config.json) of synth_vocab's DeepSeek vocabulary, so `strata run -m DIR -p` works.
// Every tensor's bytes come from synth_codes.h (tables, counter-based streams), generated chunk by
// chunk as the writer reaches them. Loadable by model/deepseek_v41 (v41_weights.cpp's names).
//
// Routing skew (`--router-skew A`, default 1 here): gate.bias, the reference's selection-only bias,
// is -0.04 A ln(rank + 1) for a seeded per-layer rank of the experts, so the selection favours
// low ranks while the weights stay the unbiased scores; simulated with iid N(0, 1) router logits at
// 384 experts top-6, A = 1 gives the top quarter of experts about 37-40 % of the choices (A = 0:
// 28 % from sampling alone over 6,000 tokens).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/text_file.h"
#include "format/safetensors_writer.h"
#include "model/deepseek_v41/v41_config.h"
#include "model/synth_codes.h"
#include "model/synth_plan.h"
#include "text/tokenizer_json_writer.h"

namespace strata {
namespace {

using nlohmann::json;
using synth_detail::Code;
using synth_detail::CodeGen;

constexpr int kHc = 4;

struct Schedule {
  std::vector<int> kv, idx;
  int cand = -1;
};

// Sources by default: the first layer of each run of equal nonzero ratios is Full (KV and index
// source), the rest Reuse; the candidate source is the first ratio-1 index source when no later
// index source has another ratio.
Schedule schedule_of(const SynthSpec& s) {
  Schedule sc;
  const auto& r = s.compress_ratios;
  for (size_t l = 0; l < r.size(); ++l)
    if (r[l] != 0 && (l == 0 || r[l - 1] != r[l])) {
      sc.kv.push_back(static_cast<int>(l));
      sc.idx.push_back(static_cast<int>(l));
    }
  if (!s.kv_sources.empty()) sc.kv = s.kv_sources;
  if (!s.index_sources.empty()) sc.idx = s.index_sources;
  sc.cand = s.candidate_layer;
  if (sc.cand == -2) {
    sc.cand = -1;
    for (int l : sc.idx)
      if (l < static_cast<int>(r.size()) && r[static_cast<size_t>(l)] == 1) {
        sc.cand = l;
        break;
      }
    for (int l : sc.idx)
      if (sc.cand >= 0 && l > sc.cand && l < static_cast<int>(r.size()) && r[static_cast<size_t>(l)] != 1)
        sc.cand = -1;
  }
  return sc;
}

int64_t hash_cols(const SynthSpec& s) {
  return int64_t{s.engram_ngram - 1} * s.engram_heads;
}
// engram_vocab_size: each table's primes start just above it, so a table has about vocab * cols rows.
int64_t engram_vocab(const SynthSpec& s) {
  const int64_t rows = s.engram_rows > 0 ? s.engram_rows : 64 * hash_cols(s);
  return std::max<int64_t>(2, rows / hash_cols(s));
}

bool is_prime(int64_t n) {
  if (n < 2) return false;
  for (int64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

// Each Engram layer's bucket primes, n-gram size major, head minor: walking layers, n-gram sizes,
// heads, the next prime above engram_vocab_size - 1 not used before (the search restarting for
// each (layer, n-gram size)), as the official tables are sized.
std::vector<std::vector<int64_t>> engram_primes(const SynthSpec& s) {
  std::vector<std::vector<int64_t>> out;
  std::vector<int64_t> used;
  for (size_t k = 0; k < s.engram_layers.size(); ++k) {
    out.emplace_back();
    for (int n = 0; n + 1 < s.engram_ngram; ++n) {
      int64_t p = engram_vocab(s) - 1;
      for (int h = 0; h < s.engram_heads; ++h) {
        do ++p;
        while (!is_prime(p) || std::find(used.begin(), used.end(), p) != used.end());
        used.push_back(p);
        out.back().push_back(p);
      }
    }
  }
  return out;
}

std::string config_text(const SynthSpec& s) {
  const Schedule sc = schedule_of(s);
  json j = {{"model_type", "deepseek_v41"},
            {"dtype", "fp8"},
            {"expert_dtype", "fp4"},
            {"quantization_config",
             {{"quant_method", "fp8"},
              {"activation_scheme", "dynamic"},
              {"weight_block_size", {32, 32}},
              {"scale_fmt", "ue8m0"}}},
            {"vocab_size", s.n_vocab},
            {"dim", s.n_embd},
            {"n_layers", s.n_layer},
            {"n_mtp_layers", 0},
            {"n_heads", s.n_head},
            {"head_dim", s.head_dim},
            {"rope_head_dim", s.rope_dim},
            {"q_lora_rank", s.q_lora},
            {"o_groups", s.out_groups},
            {"o_lora_rank", s.out_lora},
            {"norm_eps", 1e-20},
            {"window_size", s.window},
            {"compress_ratios", s.compress_ratios},
            {"kv_source_layers", sc.kv},
            {"index_source_layers", sc.idx},
            {"index_n_heads", s.indexer_heads},
            {"index_head_dim", s.indexer_dim},
            {"index_topk", s.indexer_topk},
            {"rope_theta", s.rope_base},
            {"compress_rope_theta", 160000.0},
            {"rope_factor", 16},
            {"original_seq_len", 65536},
            {"beta_fast", 32},
            {"beta_slow", 1},
            {"max_seq_len", s.n_ctx},
            {"n_routed_experts", s.n_expert},
            {"n_activated_experts", s.n_expert_used},
            {"n_shared_experts", 1},
            {"moe_inter_dim", s.expert_ffn},
            {"score_func", "sqrtsoftplus"},
            {"norm_topk_prob", true},
            {"route_scale", 1.5},
            {"gate_temp", 1.0},
            {"swiglu_limit", s.swiglu_clamp},
            {"hc_mult", kHc},
            {"hc_sinkhorn_iters", 20},
            {"hc_eps", 1e-6}};
  if (sc.cand >= 0) {
    j["candidate_source_layer"] = sc.cand;
    j["candidate_topk_blocks"] = s.candidate_blocks;
    j["candidate_block_size"] = s.candidate_block_size;
  }
  if (!s.engram_layers.empty()) {
    j["engram_layer_ids"] = s.engram_layers;
    j["engram_max_ngram_size"] = s.engram_ngram;
    j["engram_n_heads"] = s.engram_heads;
    j["engram_head_dim"] = s.engram_dim;
    j["engram_vocab_size"] = engram_vocab(s);
    j["engram_compressed_vocab_size"] = s.n_vocab;  // engram_meta.json's token map is the identity
    j["engram_pad_id"] = 2;
    // engram_num_embeddings: the sums of each layer's primes (engram_meta below).
    std::vector<int64_t> rows;
    for (const auto& pk : engram_primes(s)) {
      int64_t sum = 0;
      for (int64_t p : pk) sum += p;
      rows.push_back(sum);
    }
    j["engram_num_embeddings"] = rows;
  }
  return j.dump(1);
}

// engram_meta.json: the identity token map, odd multipliers that cannot overflow, the primes and
// their running sums as offsets.
std::string engram_meta_text(const SynthSpec& s) {
  std::vector<int32_t> map(static_cast<size_t>(s.n_vocab));
  for (int i = 0; i < s.n_vocab; ++i) map[static_cast<size_t>(i)] = i;
  json mult = json::array(), primes = json::array(), offsets = json::array();
  const uint64_t B = static_cast<uint64_t>(INT64_MAX / s.n_vocab / 2);
  const auto all = engram_primes(s);
  for (size_t k = 0; k < all.size(); ++k) {
    json m = json::array(), pk = json::array(), ok = json::array();
    for (int n = 0; n < s.engram_ngram; ++n)
      m.push_back(
          static_cast<int64_t>(synth_detail::mix64(s.seed * 10007 + k * 131 + static_cast<uint64_t>(n)) % B) *
              2 +
          1);
    int64_t off = 0;
    for (int n = 0; n + 1 < s.engram_ngram; ++n) {
      json row = json::array();
      for (int h = 0; h < s.engram_heads; ++h) {
        const int64_t p = all[k][static_cast<size_t>(n * s.engram_heads + h)];
        row.push_back(p);
        ok.push_back(off);
        off += p;
      }
      pk.push_back(row);
    }
    mult.push_back(m);
    primes.push_back(pk);
    offsets.push_back(ok);
  }
  return json{
      {"token_map", map}, {"pad_id", 2}, {"multipliers", mult}, {"primes", primes}, {"offsets", offsets}}
      .dump();
}

// The tensors, in the fixtures' order (embed, layers, norm, head), each with its generator.
class Planner {
 public:
  Planner(const SynthSpec& s, ThreadPool& pool) : s_(s), pool_(pool) {}
  std::vector<StTensorOut> ts;

  void codes(const std::string& name, StDtype t, std::vector<int64_t> shape, CodeGen g) {
    const uint64_t key = synth_detail::stream_key(s_.seed, name);
    ThreadPool* pool = &pool_;
    ts.push_back({name, t, std::move(shape), [g, key, pool](uint8_t* dst, size_t b, size_t n) -> Status {
                    synth_detail::fill_codes(g, key, dst, b, n, *pool);
                    return {};
                  }});
  }
  void bf16(const std::string& n, std::vector<int64_t> shape, float mean, float std) {
    codes(n, StDtype::bf16, std::move(shape), {Code::normal_bf16, mean, std});
  }
  void f32(const std::string& n, std::vector<int64_t> shape, float mean, float std) {
    codes(n, StDtype::f32, std::move(shape), {Code::normal_f32, mean, std});
  }
  void uniform(const std::string& n, std::vector<int64_t> shape, float lo, float hi) {
    codes(n, StDtype::f32, std::move(shape), {Code::uniform_f32, lo, hi});
  }
  void norm(const std::string& n, int64_t d) { bf16(n, {d}, 1.0f, 0.1f); }
  // FP8 [rows, cols] + `.scale` [ceil(rows/32), ceil(cols/32)]: weights of std 1/sqrt(cols).
  void fp8(const std::string& stem, int64_t rows, int64_t cols) {
    codes(stem + ".weight", StDtype::f8_e4m3, {rows, cols}, {Code::fp8});
    CodeGen sc{Code::ue8m0};
    sc.base = synth_detail::fp8_scale_base(1.0f / std::sqrt(static_cast<float>(cols)));
    codes(stem + ".scale", StDtype::f8_e8m0, {(rows + 31) / 32, (cols + 31) / 32}, sc);
  }
  // FP4 [rows, cols/2] E2M1 pairs + `.scale` [rows, cols/32].
  void fp4(const std::string& stem, int64_t rows, int64_t cols) {
    codes(stem + ".weight", StDtype::i8, {rows, cols / 2}, {Code::fp4_pairs});
    CodeGen sc{Code::ue8m0};
    sc.base = synth_detail::fp4_scale_base(1.0f / std::sqrt(static_cast<float>(cols)));
    codes(stem + ".scale", StDtype::f8_e8m0, {rows, cols / 32}, sc);
  }
  // gate.bias: the skew by a seeded rank of the experts, plus N(0, 0.01) (the whole tensor at once).
  void gate_bias(const std::string& n, int layer) {
    const int64_t E = s_.n_expert;
    std::vector<int64_t> perm(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) perm[static_cast<size_t>(e)] = e;
    for (int64_t i = E - 1; i > 0; --i)
      std::swap(perm[static_cast<size_t>(i)],
                perm[synth_detail::mix64(s_.seed * 1000003ull + static_cast<uint64_t>(layer * 7919 + i)) %
                     static_cast<uint64_t>(i + 1)]);
    std::vector<uint8_t> bytes(static_cast<size_t>(E) * 4);
    for (int64_t rank = 0; rank < E; ++rank) {
      const int64_t e = perm[static_cast<size_t>(rank)];
      const float v = -0.04f * s_.router_skew * std::log(static_cast<float>(rank + 1)) +
                      0.01f * synth_detail::normal_quantile(static_cast<uint32_t>(synth_detail::mix64(
                                  synth_detail::stream_key(s_.seed, n) + static_cast<uint64_t>(e))));
      std::memcpy(bytes.data() + 4 * e, &v, 4);
    }
    ts.push_back(st_tensor_bytes(n, StDtype::f32, {E}, std::move(bytes)));
  }

 private:
  const SynthSpec& s_;
  ThreadPool& pool_;
};

void plan_tensors(const SynthSpec& s, const v41::Config& c, Planner& p) {
  const int64_t D = s.n_embd, V = s.n_vocab, H = s.n_head, hd = s.head_dim, Q = s.q_lora, G = s.out_groups,
                R = s.out_lora, E = s.n_expert, I = s.expert_ffn, nmix = (2 + kHc) * kHc;
  const float inv_d = 1.0f / std::sqrt(static_cast<float>(D));
  p.bf16("embed.weight", {V, D}, 0.0f, 1.0f);
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string b = "layers." + std::to_string(l) + ".";
    const v41::LayerCfg& lc = c.layers[static_cast<size_t>(l)];
    for (const char* site : {"attn", "ffn"}) {
      const std::string h = b + "hc_" + site + "_";
      p.f32(h + "fn", {nmix, kHc * D}, 0.0f, 1.0f / std::sqrt(static_cast<float>(kHc * D)));
      p.f32(h + "base", {nmix}, 0.0f, 0.1f);
      p.uniform(h + "scale", {3}, 0.25f, 0.75f);
    }
    p.norm(b + "attn_norm.weight", D);
    p.norm(b + "ffn_norm.weight", D);
    const std::string a = b + "attn.";
    p.uniform(a + "attn_sink", {H}, -0.5f, 0.0f);
    p.fp8(a + "wq_a", Q, D);
    p.norm(a + "q_norm.weight", Q);
    p.fp8(a + "wq_b", H * hd, Q);
    p.fp8(a + "wkv", hd, D);
    p.norm(a + "kv_norm.weight", hd);
    p.fp8(a + "wo_a", G * R, H * hd / G);
    p.fp8(a + "wo_b", D, G * R);
    if (lc.kv_source) {
      if (lc.ratio > 1) {
        p.f32(a + "compressor.wkv.weight", {hd, D}, 0.0f, inv_d);
        p.f32(a + "compressor.wgate.weight", {hd, D}, 0.0f, inv_d);
      } else {
        p.bf16(a + "compressor.wkv.weight", {hd, D}, 0.0f, inv_d);
      }
      p.norm(a + "compressor.norm.weight", hd);
    }
    if (lc.index_source) {
      p.fp8(a + "indexer.wq_b", int64_t{s.indexer_heads} * s.indexer_dim, Q);
      p.bf16(a + "indexer.weights_proj.weight", {s.indexer_heads, D}, 0.0f, inv_d);
      if (lc.owns_index_k) {
        p.fp8(a + "indexer.wk", s.indexer_dim, hd);
        p.norm(a + "indexer.k_norm.weight", s.indexer_dim);
      }
    }
    const std::string f = b + "ffn.";
    p.bf16(f + "gate.weight", {E, D}, 0.0f, inv_d);
    p.gate_bias(f + "gate.bias", l);
    for (int64_t e = 0; e < E; ++e) {
      const std::string x = f + "experts." + std::to_string(e) + ".";
      p.fp4(x + "w1", I, D);
      p.fp4(x + "w2", D, I);
      p.fp4(x + "w3", I, D);
    }
    p.fp8(f + "shared_experts.w1", I, D);
    p.fp8(f + "shared_experts.w2", D, I);
    p.fp8(f + "shared_experts.w3", I, D);
    if (lc.engram >= 0) {
      const std::string g = b + "engram.";
      const int64_t rows = c.engram_rows[static_cast<size_t>(lc.engram)], ed = s.engram_dim;
      p.codes(g + "embed.weight", StDtype::f8_e4m3, {rows, ed}, {Code::e4m3_any});
      CodeGen sc{Code::ue8m0};
      sc.base = 127 - 8;  // values up to 448 / 256, as the fixtures' tables
      p.codes(g + "embed.scale", StDtype::f8_e8m0, {rows, ed / 32}, sc);
      p.fp8(g + "wkv", D * (kHc + 1), hash_cols(s) * ed);
      p.bf16(g + "q_weight", {kHc, D}, 1.0f, 0.1f);
      p.bf16(g + "k_weight", {kHc, D}, 1.0f, 0.1f);
    }
  }
  p.norm("norm.weight", D);
  p.bf16("head.weight", {V, D}, 0.0f, inv_d);
}

}  // namespace

SynthSpec synth_preset_v41_flash(int n_layer) {
  SynthSpec s;
  s.arch = "deepseek_v41";
  s.n_layer = n_layer;
  s.n_embd = 5120;
  s.n_head = 64;
  s.n_head_kv = 1;
  s.head_dim = 512;
  s.rope_dim = 64;
  s.q_lora = 1280;
  s.out_groups = 8;
  s.out_lora = 1024;
  s.window = 128;
  s.n_expert = 384;
  s.n_expert_used = 6;
  s.expert_ffn = 2304;
  s.indexer_heads = 32;
  s.indexer_dim = 128;
  s.indexer_topk = 512;
  s.candidate_blocks = 2048;
  s.candidate_block_size = 8;
  s.engram_heads = 8;
  s.engram_dim = 256;
  s.engram_ngram = 4;
  s.engram_rows = 4000000;
  s.n_vocab = 129280;
  s.n_ctx = 4096;  // max_seq_len: the real 1,048,576 would size a run's caches for 1M tokens (--ctx)
  s.rope_base = 10000.0f;
  s.router_skew = 1.0f;
  s.compress_ratios.assign(static_cast<size_t>(n_layer), 2);
  s.type = "fp8";
  return s;
}

SynthSpec synth_preset_v41_tiny() {
  SynthSpec s = synth_preset_v41_flash(4);
  s.n_embd = 128;
  s.n_head = 4;
  s.head_dim = 64;
  s.rope_dim = 32;
  s.q_lora = 32;
  s.out_groups = 2;
  s.out_lora = 32;
  s.window = 8;
  s.n_expert = 8;
  s.n_expert_used = 2;
  s.expert_ffn = 64;
  s.indexer_heads = 4;
  s.indexer_dim = 64;
  s.indexer_topk = 4;
  s.candidate_blocks = 2;
  s.candidate_block_size = 4;
  s.engram_heads = 2;
  s.engram_dim = 32;
  s.engram_ngram = 3;
  s.engram_rows = 0;
  s.engram_layers = {0, 2};
  s.n_vocab = 512;
  s.n_ctx = 4096;
  s.compress_ratios = {0, 2, 1, 1};
  s.index_sources = {1, 2, 3};
  return s;
}

Status synth_validate_deepseek_v41(const SynthSpec& s) {
  if (s.type != "fp8")
    return err("--type %s: deepseek_v41 writes FP8 dense / FP4 experts (fp8)", s.type.c_str());
  if (s.n_vocab < 262) return err("--vocab must be >= 262 (256 bytes + 6 control tokens), got %d", s.n_vocab);
  if (s.n_vocab > (1 << 21)) return err("--vocab %d is too large", s.n_vocab);
  if (s.n_embd < 32 || s.n_embd % 32) return err("--embd %d must be a positive multiple of 32", s.n_embd);
  if (s.n_head_kv != 1) return err("--kv-heads must be 1 for deepseek_v41 (got %d)", s.n_head_kv);
  if (s.head_dim < 32 || s.head_dim % 32)
    return err("--head-dim %d must be a positive multiple of 32 for deepseek_v41", s.head_dim);
  if (s.expert_ffn < 32 || s.expert_ffn % 32)
    return err("--expert-ffn %d must be a positive multiple of 32 (FP4 blocks)", s.expert_ffn);
  if (s.n_expert < 1 || s.n_expert_used < 1 || s.n_expert_used > s.n_expert)
    return err("--top-k %d must be in [1, --experts %d]", s.n_expert_used, s.n_expert);
  if (static_cast<int>(s.compress_ratios.size()) != s.n_layer)
    return err("--compress-ratios has %zu entries, --layers is %d", s.compress_ratios.size(), s.n_layer);
  for (int r : s.compress_ratios)
    if (r < 0 || r > 2) return err("--compress-ratios: %d is not one of 0, 1, 2", r);
  if (!std::isfinite(s.router_skew) || s.router_skew < 0)
    return err("--router-skew must be >= 0 (got %g)", s.router_skew);
  if (s.shard_bytes < (1u << 10)) return err("--shard-size must be >= 1K");
  if (!s.engram_layers.empty()) {
    if (s.engram_ngram < 2) return err("--engram-ngram %d must be >= 2", s.engram_ngram);
    if (s.engram_heads < 1) return err("--engram-heads %d must be >= 1", s.engram_heads);
    if (s.engram_dim < 32 || s.engram_dim % 32)
      return err("--engram-dim %d must be a positive multiple of 32", s.engram_dim);
    if (s.engram_rows < 0 || s.engram_rows > (int64_t{1} << 40))
      return err("--engram-rows %lld is out of range", static_cast<long long>(s.engram_rows));
  }
  // Everything else (widths, the layer schedule) as the loader checks config.json, its keys
  // named by the flags they come from.
  auto c = v41::parse_config(config_text(s), "deepseek_v41");
  if (c.ok()) return {};
  std::string m = c.message();
  static const std::pair<const char*, const char*> kFlags[] = {
      {"kv_source_layers", "--kv-sources"},
      {"index_source_layers", "--index-sources"},
      {"candidate_source_layer", "--candidate-layer"},
      {"candidate_topk_blocks", "--candidate-blocks"},
      {"candidate_block_size", "--candidate-block-size"},
      {"engram_layer_ids", "--engram-layers"},
      {"compress_ratios", "--compress-ratios"},
      {"rope_head_dim", "--rope-dim"},
      {"index_head_dim", "--indexer-dim"},
      {"index_n_heads", "--indexer-heads"},
      {"index_topk", "--indexer-topk"},
      {"q_lora_rank", "--q-lora"},
      {"o_groups", "--out-groups"},
      {"o_lora_rank", "--out-lora"},
      {"window_size", "--window"},
      {"n_routed_experts", "--experts"},
      {"n_activated_experts", "--top-k"}};
  for (const auto& [key, flag] : kFlags)
    for (size_t at = m.find(key); at != std::string::npos; at = m.find(key, at))
      m.replace(at, std::strlen(key), flag);
  return Error{m};
}

Result<SynthInfo> synth_write_deepseek_v41(const SynthSpec& s, const std::string& dir) {
  namespace fs = std::filesystem;
  STRATA_TRY(synth_validate_deepseek_v41(s));
  const double t0 = now_seconds();
  const std::string cfg = config_text(s);
  STRATA_ASSIGN(const v41::Config c, v41::parse_config(cfg, dir + "/config.json"));
  ThreadPool pool(s.n_threads);
  Planner p(s, pool);
  plan_tensors(s, c, p);
  STRATA_ASSIGN(const StDirWritten w, write_safetensors_dir(dir, p.ts, s.shard_bytes));
  STRATA_TRY(write_text_file((fs::path(dir) / "config.json").string(), cfg + "\n"));
  if (!s.engram_layers.empty())
    STRATA_TRY(write_text_file((fs::path(dir) / "engram_meta.json").string(), engram_meta_text(s)));
  const SynthVocab sv = synth_vocab(s.n_vocab, s.arch);
  text::VocabData vd;
  vd.model = "gpt2";
  vd.pre = sv.pre;
  vd.tokens = sv.tokens;
  vd.token_types = sv.types;
  vd.merges = sv.merges;
  vd.bos_id = sv.bos;
  vd.eos_id = sv.eos;
  vd.add_bos = true;
  STRATA_ASSIGN(const std::string tj, text::to_tokenizer_json(vd));
  STRATA_TRY(write_text_file((fs::path(dir) / "tokenizer.json").string(), tj));
  const json tc = {{"bos_token", sv.tokens[static_cast<size_t>(sv.bos)]},
                   {"eos_token", sv.tokens[static_cast<size_t>(sv.eos)]},
                   {"add_bos_token", true},
                   {"add_eos_token", false}};
  STRATA_TRY(write_text_file((fs::path(dir) / "tokenizer_config.json").string(), tc.dump(1) + "\n"));
  SynthInfo info;
  for (const StTensorOut& t : p.ts) {
    uint64_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    info.n_params += t.dtype == StDtype::i8 ? 2 * n : (t.dtype == StDtype::f8_e8m0 ? 0 : n);
  }
  info.n_tensors = static_cast<int>(p.ts.size());
  info.n_bytes = w.bytes;
  info.n_files = w.n_shards;
  info.seconds = now_seconds() - t0;
  return info;
}

}  // namespace strata
