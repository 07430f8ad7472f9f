// deepseek_v41 (DeepSeek-V4.1-Flash): V4's mHC / sink attention / sqrt-softplus MoE with CSA2
// (compressed KV shared across layers: Full / Reindex / Reuse, two-level indexer), single-pass
// mHC hand-off and Engram n-gram memory (deepseek-v4.md §4). Blocks: model/v41_*.{h,cpp};
// this file binds them to the Architecture interface, loads the checkpoint directory and gives
// the registry its entry (matches / make_arch_deepseek_v41 / kv_spec_deepseek_v41).
#include <filesystem>
#include <nlohmann/json.hpp>

#include "format/safetensors_dir.h"
#include "model/deepseek4/ds4_rope.h"
#include "model/deepseek_v41/v41_arch.h"
#include "model/deepseek_v41/v41_config.h"
#include "model/deepseek_v41/v41_experts.h"

namespace strata {

namespace {

class DeepseekV41 : public Architecture {
 public:
  DeepseekV41(HParams hp, std::unique_ptr<v41::V41Model> m) : hp_(std::move(hp)), m_(std::move(m)) {}
  const HParams& hparams() const override { return hp_; }
  KvSpec kv_spec() const override { return v41::v41_kv_spec(m_->cfg); }
  Result<KvSpec> kv_spec_for(const KvTypes& types) const override {
    return v41::v41_kv_spec_for(m_->cfg, types);
  }
  const v41::V41Model& model() const { return *m_; }

  Result<std::unique_ptr<ArchState>> new_state(const StateOptions& opts) const override {
    if (opts.n_ctx < 1 || opts.n_batch < 1) return err("deepseek_v41: n_ctx and n_batch must be >= 1");
    STRATA_ASSIGN(const KvSpec spec, v41::v41_kv_spec_for(m_->cfg, opts.kv));
    const auto* share = static_cast<const v41::V41State*>(opts.share_scratch);
    if (share && share->n_batch != opts.n_batch)
      return err("deepseek_v41: share_scratch has another n_batch");
    auto st = std::make_unique<v41::V41State>(*m_, opts.n_ctx, opts.n_batch, share, &spec);
    st->experts = opts.experts;
    return std::unique_ptr<ArchState>(std::move(st));
  }

  Status forward(const Batch& b, float* logits, ThreadPool& pool) const override {
    return v41::v41_forward(*m_, b, logits, pool);
  }

 private:
  HParams hp_;
  std::unique_ptr<v41::V41Model> m_;
};

HParams generic_hparams(const v41::Config& c) {
  HParams hp;
  hp.arch = "deepseek_v41";
  hp.n_layer = c.n_layers;
  hp.n_embd = c.dim;
  hp.n_head = c.n_heads;
  hp.n_head_kv = 1;
  hp.head_dim_k = hp.head_dim_v = c.head_dim;
  hp.n_vocab = c.vocab;
  hp.n_ctx_train = c.max_seq_len > 0 ? c.max_seq_len : 4096;
  hp.rms_eps = c.eps;
  hp.rope_style = RopeStyle::rope_style_norm;
  hp.rope.n_rot = c.rope_dim;
  hp.rope.freq_base = static_cast<float>(c.rope_theta);
  hp.n_expert = c.n_experts;
  hp.n_expert_used = c.n_active;
  hp.n_ff_exp = c.moe_inter;
  hp.n_ff_shexp = c.moe_inter * c.n_shared;
  hp.sliding_window = c.window;
  hp.layers.resize(static_cast<size_t>(c.n_layers));
  for (int l = 0; l < c.n_layers; ++l) {
    LayerParams& lp = hp.layers[l];
    lp.n_head = c.n_heads;
    lp.n_head_kv = 1;
    lp.window = c.window;
    lp.compress_ratio = c.layers[l].ratio;
    lp.n_ff_exp = c.moe_inter;
    lp.attn_kind = c.layers[l].ratio ? AttnKind::attn_kind_csa : AttnKind::attn_kind_sliding;
  }
  return hp;
}

}  // namespace

Result<V41Loaded> load_deepseek_v41_dir(const std::string& dir, const EngramStoreOptions& engram,
                                        v41::V41Numerics numerics, const ExpertStoreOptions* experts) {
  namespace fs = std::filesystem;
  const std::string cfg_path = (fs::path(dir) / "config.json").string();
  STRATA_ASSIGN(std::string cfg_text, read_text_file(cfg_path));
  auto m = std::make_unique<v41::V41Model>();
  STRATA_ASSIGN(m->cfg, v41::parse_config(cfg_text, cfg_path));
  const v41::Config& c = m->cfg;
  if (!c.engram_layers.empty()) {
    const std::string meta_path = (fs::path(dir) / "engram_meta.json").string();
    STRATA_ASSIGN(std::string meta_text, read_text_file(meta_path));
    STRATA_ASSIGN(m->meta, v41::parse_engram_meta(meta_text, meta_path, c));
  }
  V41Loaded out;
  STRATA_ASSIGN(out.dir, SafetensorsDir::open(dir));
  const bool tiered = engram.budget_bytes > 0;
  m->numerics = numerics;
  const bool fast = numerics == v41::V41Numerics::fast;
  const bool streamed = experts && experts->budget_bytes > 0;
  if (experts && !fast)
    return err(
        "checkpoint %s: the expert store (--expert-budget, expert statistics) serves the fast numerics, "
        "not --v41-numerics oracle",
        dir.c_str());
  STRATA_ASSIGN(
      m->w, v41::bind_weights(*out.dir, c, /*engram_tables=*/!tiered, fast, /*routed_experts=*/!streamed));
  if (experts) {
    STRATA_ASSIGN(out.experts, v41::open_v41_expert_store(*out.dir, *m, *experts));
    // Every weight is in the model's own memory now: the shards' mapped pages go (the store reads
    // its experts with O_DIRECT), so the resident set is what the plan bills.
    if (streamed)
      for (const auto& sh : out.dir->shards()) sh->drop_resident_pages();
  }
  m->fast_rope_plain = ds4::rope_plain(c.rope_dim, static_cast<float>(c.rope_theta));
  m->fast_rope_comp =
      ds4::rope_yarn(c.rope_dim, static_cast<float>(c.compress_rope_theta), static_cast<float>(c.rope_factor),
                     c.original_seq_len, static_cast<float>(c.beta_fast), static_cast<float>(c.beta_slow));
  m->rope_plain = v41::Rope::make(c.rope_dim, c.rope_theta, 0, 1.0, c.beta_fast, c.beta_slow);
  m->rope_comp = v41::Rope::make(c.rope_dim, c.compress_rope_theta, c.original_seq_len, c.rope_factor,
                                 c.beta_fast, c.beta_slow);
  if (tiered) {
    STRATA_ASSIGN(out.engram, open_tiered_engram_rows(*out.dir, c, engram));
    m->engram_rows = out.engram.get();
  } else {
    std::vector<const v41::Mat*> vals, scales;
    for (int l : c.engram_layers) {
      vals.push_back(&m->w.layers[static_cast<size_t>(l)].e_embed);
      scales.push_back(&m->w.layers[static_cast<size_t>(l)].e_scale);
    }
    m->resident_rows =
        std::make_unique<v41::ResidentEngramRows>(std::move(vals), std::move(scales), c.engram_head_dim);
    m->engram_rows = m->resident_rows.get();
  }
  out.model = m.get();
  out.arch = std::make_unique<DeepseekV41>(generic_hparams(c), std::move(m));
  return out;
}

// The fixtures' configs (upstream ModelArgs) carry no model_type: the CSA2 source lists name it.
bool matches_deepseek_v41(const nlohmann::json& j) {
  if (j.contains("model_type") && j["model_type"].is_string() &&
      j["model_type"].get<std::string>() == "deepseek_v41")
    return true;
  return j.contains("kv_source_layers") || j.contains("kv_source_layer_ids");
}

Result<DirModel> make_arch_deepseek_v41(const std::string& dir, const DirLoadOptions& o) {
  const bool store = o.experts.budget_bytes > 0 || o.expert_stats;
  STRATA_ASSIGN(
      V41Loaded v,
      load_deepseek_v41_dir(dir, o.engram, o.v41_oracle ? v41::V41Numerics::oracle : v41::V41Numerics::fast,
                            store ? &o.experts : nullptr));
  DirModel d;
  d.arch = std::move(v.arch);
  d.dir = std::move(v.dir);
  d.engram = std::move(v.engram);
  d.experts = std::move(v.experts);
  return d;
}

Result<KvSpec> kv_spec_deepseek_v41(const std::string& config_text, const std::string& source) {
  STRATA_ASSIGN(v41::Config c, v41::parse_config(config_text, source));
  return v41::v41_kv_spec(c);
}

}  // namespace strata
