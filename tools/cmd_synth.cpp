// strata synth: write a seeded random-weight GGUF of any shape and type (model/synth.h).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "base/units.h"
#include "command.h"
#include "model/synth.h"

namespace {

// The value of `--preset X` / `--preset=X` in argv ("" when absent): a preset fills the spec
// before the other flags are parsed, so any flag given overrides it.
std::string preset_arg(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--preset" && i + 1 < argc) return argv[i + 1];
    if (a.rfind("--preset=", 0) == 0) return a.substr(9);
  }
  return "";
}

int cmd_synth(int argc, char** argv) {
  strata::SynthSpec s;
  std::string out, ctx = "4096", vocab, preset = preset_arg(argc, argv);
  if (preset == "v4-flash") {
    s = strata::synth_preset_v4_flash(4);
    vocab = std::to_string(s.n_vocab);
  } else if (!preset.empty()) {
    std::fprintf(stderr, "strata synth: error: --preset '%s' is not known (use v4-flash)\n", preset.c_str());
    return 2;
  }
  const bool need = preset.empty();  // without a preset the shape flags are required
  CLI::App app{"Write a random-weight GGUF model (for tests and benchmarks)", "strata synth"};
  app.add_option(
      "--preset", preset,
      "v4-flash: DeepSeek-V4-Flash's widths (deepseek4, 4 layers, ratios 0,0,4,128, MXFP4 experts); "
      "other flags override");
  app.add_option("--arch", s.arch, "architecture: qwen3moe | llama | qwen2moe | deepseek4")
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
  app.add_option(
         "--type", s.type,
         "f32 | f16 | q8_0 | q4_0 | q4_k | q6_k | mxfp4 / nvfp4 (experts MXFP4 / NVFP4, rest Q8_0) | q4_k_m "
         "(llama.cpp's Q4_K_M mix of Q4_K and Q6_K)")
      ->capture_default_str();
  app.add_option("--seed", s.seed, "RNG seed")->capture_default_str();
  app.add_flag("--fim", s.fim, "add fill-in-the-middle tokens (<|fim_prefix|> ...) for infill tests");
  app.add_option("--router-skew", s.router_skew, "Zipf exponent of expert popularity (0 = none)");
  app.add_option("--ctx", ctx, "context_length metadata (K suffix ok)")->capture_default_str();
  app.add_option("--rope-base", s.rope_base, "rope.freq_base")->capture_default_str();
  app.add_option("-t,--threads", s.n_threads, "generator threads (default all cores)");
  app.add_option("-o,--output", out, "output GGUF path")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "strata synth: error: %s\n", e.what());
    return 2;
  }
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
  if (auto st = strata::synth_validate(s); !st.ok()) {
    std::fprintf(stderr, "strata synth: error: %s\n", st.message().c_str());
    return 2;
  }
  auto r = strata::synth_write(s, out);
  if (!r.ok()) {
    std::fprintf(stderr, "strata synth: error: %s\n", r.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "strata synth: wrote %s: %s %s, %d tensors, %.2f M params, %s in %.2f s\n",
               out.c_str(), s.arch.c_str(), s.type.c_str(), r->n_tensors, r->n_params / 1e6,
               strata::format_bytes(r->n_bytes).c_str(), r->seconds);
  return 0;
}

const strata::cli::Registrar reg{"synth", "write a random-weight GGUF model of any shape and type",
                                 &cmd_synth};

}  // namespace
