// strata synth: write a seeded random-weight GGUF of any shape and type (model/synth.h).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <tuple>

#include "base/units.h"
#include "command.h"
#include "model/synth.h"

namespace {

// The value of `--NAME X` / `--NAME=X` in argv ("" when absent): a preset fills the spec before
// the other flags are parsed, so any flag given overrides it.
std::string flag_arg(int argc, char** argv, const std::string& name) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == name && i + 1 < argc) return argv[i + 1];
    if (a.rfind(name + "=", 0) == 0) return a.substr(name.size() + 1);
  }
  return "";
}

// deepseek_v41 with --layers but no --compress-ratios: the preset's schedule cut or extended to
// the layer count (its last ratio repeated), its source and Engram lists cut to the layers.
void fit_v41_layers(strata::SynthSpec& s, const CLI::App& app) {
  if (s.arch != "deepseek_v41" || app.count("--compress-ratios")) return;
  auto& r = s.compress_ratios;
  const int last = r.empty() ? 2 : r.back();
  r.resize(static_cast<size_t>(std::max(s.n_layer, 0)), last);
  auto cut = [&](std::vector<int>& v, const char* flag) {
    if (app.count(flag)) return;
    std::erase_if(v, [&](int l) { return l >= s.n_layer; });
  };
  cut(s.kv_sources, "--kv-sources");
  cut(s.index_sources, "--index-sources");
  cut(s.engram_layers, "--engram-layers");
}

int cmd_synth(int argc, char** argv) {
  strata::SynthSpec s;
  std::string out, ctx = "4096", vocab, preset = flag_arg(argc, argv, "--preset"), engram_rows, shard = "5G";
  if (preset == "v4-flash") {
    s = strata::synth_preset_v4_flash(4);
  } else if (preset == "v41-flash") {
    s = strata::synth_preset_v41_flash(4);
  } else if (!preset.empty()) {
    std::fprintf(stderr, "strata synth: error: --preset '%s' is not known (use v4-flash or v41-flash)\n",
                 preset.c_str());
    return 2;
  } else if (flag_arg(argc, argv, "--arch") == "deepseek_v41") {
    s = strata::synth_preset_v41_tiny();  // the small test shape; any flag overrides it
  }
  if (s.arch == "deepseek_v41" || s.arch == "deepseek4") {
    vocab = std::to_string(s.n_vocab);
    ctx = std::to_string(s.n_ctx);
    engram_rows = std::to_string(s.engram_rows);
  }
  const bool need = preset.empty() && s.arch != "deepseek_v41";  // else the shape flags are required
  CLI::App app{"Write a random-weight GGUF model (for tests and benchmarks)", "strata synth"};
  app.add_option(
      "--preset", preset,
      "v4-flash: DeepSeek-V4-Flash's widths (deepseek4, 4 layers, ratios 0,0,4,128, MXFP4 experts); "
      "v41-flash: DeepSeek-V4.1-Flash's (deepseek_v41 checkpoint directory, 4 layers of ratio 2, FP8 dense, "
      "FP4 experts, Engram tables of 4M rows); other flags override");
  app.add_option(
         "--arch", s.arch,
         "architecture: qwen3moe | llama | qwen2moe | deepseek4 | deepseek_v41 (a checkpoint directory; "
         "alone: a small test shape)")
      ->capture_default_str();
  app.add_option("--layers", s.n_layer, "transformer blocks")->required(need);
  app.add_option("--embd", s.n_embd, "model width d")->required(need);
  app.add_option("--heads", s.n_head, "attention heads")->required(need);
  app.add_option("--kv-heads", s.n_head_kv, "key/value heads (GQA; deepseek4: 1)")->required(need);
  app.add_option("--head-dim", s.head_dim, "head dim (default embd/heads)");
  app.add_option("--experts", s.n_expert, "routed experts (llama: 0 = dense)");
  app.add_option("--top-k", s.n_expert_used, "experts used per token");
  app.add_option("--expert-ffn", s.expert_ffn, "routed expert FFN width");
  app.add_option("--ffn", s.ffn, "dense FFN width (llama without experts)");
  app.add_option("--shared-ffn", s.shared_ffn, "shared expert FFN width (qwen2moe; default expert-ffn)");
  app.add_option("--vocab", vocab, "vocabulary size (>= 259; K/M suffixes)")->required(need);
  app.add_option("--rope-dim", s.rope_dim, "deepseek4: rotated dims per head");
  app.add_option("--q-lora", s.q_lora, "deepseek4: query low-rank width");
  app.add_option("--out-groups", s.out_groups, "deepseek4: output projection groups");
  app.add_option("--out-lora", s.out_lora, "deepseek4: output low-rank width per group");
  app.add_option("--window", s.window, "deepseek4: sliding window")->capture_default_str();
  app.add_option("--compress-ratios", s.compress_ratios, "deepseek4: per layer 0 / 4 / 128 (comma list)")
      ->delimiter(',');
  app.add_option("--hash-layers", s.hash_layers, "deepseek4: the first N layers route by token id");
  app.add_option("--indexer-heads", s.indexer_heads, "deepseek4: lightning indexer heads");
  app.add_option("--indexer-dim", s.indexer_dim, "deepseek4: indexer key width");
  app.add_option("--indexer-topk", s.indexer_topk, "deepseek4: compressed entries a query attends");
  app.add_option("--swiglu-clamp", s.swiglu_clamp, "deepseek4: SwiGLU clamp")->capture_default_str();
  app.add_option("--kv-sources", s.kv_sources, "deepseek_v41: layers that compress their own KV (comma list)")
      ->delimiter(',');
  app.add_option("--index-sources", s.index_sources,
                 "deepseek_v41: layers with their own indexer (comma list)")
      ->delimiter(',');
  app.add_option("--candidate-layer", s.candidate_layer,
                 "deepseek_v41: the candidate-block source layer (-1: none; default the first ratio-1 index "
                 "source)");
  app.add_option("--candidate-blocks", s.candidate_blocks, "deepseek_v41: candidate_topk_blocks");
  app.add_option("--candidate-block-size", s.candidate_block_size, "deepseek_v41: candidate_block_size");
  app.add_option("--engram-layers", s.engram_layers, "deepseek_v41: layers with an Engram table (comma list)")
      ->delimiter(',');
  app.add_option("--engram-rows", engram_rows,
                 "deepseek_v41: rows per Engram table, about (K/M/G suffixes; v41-flash: 4M, ~1 GB; the real "
                 "model: 384M)");
  app.add_option("--engram-heads", s.engram_heads, "deepseek_v41: Engram hash heads");
  app.add_option("--engram-dim", s.engram_dim, "deepseek_v41: Engram row width");
  app.add_option("--engram-ngram", s.engram_ngram, "deepseek_v41: Engram max n-gram size");
  app.add_option("--shard-size", shard, "deepseek_v41: safetensors shard size (K/M/G suffixes)")
      ->capture_default_str();
  app.add_option(
         "--type", s.type,
         "f32 | f16 | q8_0 | q4_0 | q4_k | q6_k | mxfp4 / nvfp4 (experts MXFP4 / NVFP4, rest Q8_0) | q4_k_m "
         "(llama.cpp's Q4_K_M mix of Q4_K and Q6_K) | fp8 (deepseek_v41's only: FP8 dense, FP4 experts)")
      ->capture_default_str();
  app.add_option("--seed", s.seed, "RNG seed")->capture_default_str();
  app.add_flag("--fim", s.fim, "add fill-in-the-middle tokens (<|fim_prefix|> ...) for infill tests");
  std::string draws = "box-muller";
  app.add_option(
         "--draws", draws,
         "normal draws: box-muller (default) | quantile (16-bit quantile lookups, several times faster "
         "for models of tens of GB; other bytes)")
      ->check(CLI::IsMember({"box-muller", "quantile"}))
      ->capture_default_str();
  app.add_option("--router-skew", s.router_skew, "Zipf exponent of expert popularity (0 = none)");
  app.add_option("--ctx", ctx, "context_length metadata (K suffix ok)")->capture_default_str();
  app.add_option("--rope-base", s.rope_base, "rope.freq_base")->capture_default_str();
  app.add_option("-t,--threads", s.n_threads, "generator threads (default all cores)");
  app.add_option("-o,--output", out, "output GGUF path (deepseek_v41: a directory)")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "strata synth: error: %s\n", e.what());
    return 2;
  }
  s.quantile_draws = draws == "quantile";
  auto c = strata::parse_size(ctx);
  if (!c.ok() || *c == 0 || *c > (1u << 30)) {
    std::fprintf(stderr, "strata synth: error: --ctx: %s\n", c.ok() ? "out of range" : c.message().c_str());
    return 2;
  }
  s.n_ctx = static_cast<int>(*c);
  auto v = strata::parse_size(vocab);
  if (!v.ok() || *v > (1u << 24)) {
    std::fprintf(stderr, "strata synth: error: --vocab: %s\n", v.ok() ? "too large" : v.message().c_str());
    return 2;
  }
  s.n_vocab = static_cast<int>(*v);
  fit_v41_layers(s, app);
  for (const auto& [flag, text, dst] : {std::tuple{"--engram-rows", &engram_rows, &s.engram_rows},
                                        std::tuple{"--shard-size", &shard, static_cast<int64_t*>(nullptr)}}) {
    if (text->empty()) continue;
    auto n = strata::parse_size(*text);
    if (!n.ok() || *n > (uint64_t{1} << 50)) {
      std::fprintf(stderr, "strata synth: error: %s: %s\n", flag, n.ok() ? "too large" : n.message().c_str());
      return 2;
    }
    if (dst)
      *dst = static_cast<int64_t>(*n);
    else
      s.shard_bytes = *n;
  }
  if (auto st = strata::synth_validate(s); !st.ok()) {
    std::fprintf(stderr, "strata synth: error: %s\n", st.message().c_str());
    return 2;
  }
  auto r = strata::synth_write(s, out);
  if (!r.ok()) {
    std::fprintf(stderr, "strata synth: error: %s\n", r.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "strata synth: wrote %s: %s %s, %d tensors, %.2f M params, %s in %d file%s, %.2f s\n",
               out.c_str(), s.arch.c_str(), s.type.c_str(), r->n_tensors, r->n_params / 1e6,
               strata::format_bytes(r->n_bytes).c_str(), r->n_files, r->n_files == 1 ? "" : "s", r->seconds);
  return 0;
}

const strata::cli::Registrar reg{"synth", "write a random-weight GGUF model of any shape and type",
                                 &cmd_synth};

}  // namespace
