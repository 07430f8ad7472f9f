// strata run: load a model, generate from a prompt, stream the text to stdout and print prompt /
// generation speed to stderr at the end (like llama.cpp's perf summary). The request runs through
// serve's engine with one slot (runtime/engine.h), on the same paged KV pool and prefix cache
// (tools/kv_pool_flags.h: --kv-budget, --block-size, -cram, --prefix-cache-dir, ...); an
// architecture without paged KV keeps contiguous KV and says so in the summary.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "base/clock.h"
#include "cli_args.h"
#include "command.h"
#include "engram_flags.h"
#include "device_flags.h"
#include "expert_flags.h"
#include "kv_pool_flags.h"
#include "mem_report.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/sampler.h"

namespace {

int fail(const std::string& msg, int code = 1) {
  std::fprintf(stderr, "strata run: error: %s\n", msg.c_str());
  return code;
}

// Token ids in, token ids out: the path for models without a tokenizer (checkpoint directories).
int run_token_ids(strata::Model& model, strata::Engine& engine, const std::string& ids_text,
                  const strata::GenerateOptions& o, bool quiet, const std::string& no_pool) {
  std::vector<int32_t> ids;
  std::string s = ids_text;
  for (char& ch : s)
    if (ch == ',') ch = ' ';
  std::istringstream is(s);
  std::string t;
  while (is >> t) {
    char* end = nullptr;
    const long long v = std::strtoll(t.c_str(), &end, 10);
    if (!end || *end != '\0' || v < 0 || v >= model.n_vocab())
      return fail("--tokens: bad token id '" + t + "' (vocabulary " + std::to_string(model.n_vocab()) + ")",
                  2);
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) return fail("--tokens: no token ids given", 2);
  if (static_cast<int>(ids.size()) >= engine.n_ctx())
    return fail("prompt is " + std::to_string(ids.size()) + " tokens, context is " +
                std::to_string(engine.n_ctx()));
  int n = 0;
  auto st = strata::generate_ids(engine, std::move(ids), o, [&](int32_t tok) {
    std::fprintf(stdout, "%s%d", n++ ? "," : "", tok);
    std::fflush(stdout);
    return true;
  });
  std::fputc('\n', stdout);
  if (!st.ok()) return fail(st.message());
  if (!quiet) {
    std::fprintf(stderr, "strata: prompt %d tokens in %.2f ms, generated %d tokens in %.2f ms\n",
                 st->n_prompt, st->prompt_s * 1e3, st->n_gen, st->decode_s * 1e3);
    std::fputs(strata::cli::kv_summary_text(engine, no_pool, st->n_prompt + st->n_cached + st->n_decode,
                                            st->n_cached, st->n_prompt + st->n_cached)
                   .c_str(),
               stderr);
  }
  return 0;
}

int cmd_run(int argc, char** argv) {
  std::string model_path, prompt, prompt_file, ctx = "0", tokens_str;
  int threads = 0, n_batch = 512;
  bool quiet = false, verbose_prompt = false;
  strata::GenerateOptions o;
  o.n_predict = -1;
  CLI::App app{"Generate text from a prompt", "strata run"};
  app.add_option("-m,--model", model_path, "GGUF model or checkpoint directory")->required();
  std::string tokenizer_path;
  app.add_option(
      "--tokenizer", tokenizer_path,
      "Hugging Face tokenizer.json to use instead of the model's (a tokenizer_config.json beside it "
      "is read too)");
  app.add_option("-p,--prompt", prompt, "prompt text");
  app.add_option("-f,--file", prompt_file, "read the prompt from a file");
  app.add_option(
      "--tokens", tokens_str,
      "prompt as token ids (comma separated); prints the generated ids (models without a tokenizer)");
  app.add_option("-n,--n-predict", o.n_predict, "tokens to generate (-1: until end of text or full context)")
      ->capture_default_str();
  app.add_option("--temp", o.sampling.temp, "temperature (<= 0: greedy)")->capture_default_str();
  app.add_option("--top-k", o.sampling.top_k, "top-k (0: off)")->capture_default_str();
  app.add_option("--top-p", o.sampling.top_p, "top-p (1: off)")->capture_default_str();
  app.add_option("--min-p", o.sampling.min_p, "min-p (0: off)")->capture_default_str();
  app.add_option("--repeat-penalty", o.sampling.repeat_penalty, "repetition penalty (1: off)")
      ->capture_default_str();
  app.add_option("--repeat-last-n", o.sampling.repeat_last_n, "tokens of history penalised")
      ->capture_default_str();
  int64_t seed = -1;
  app.add_option("-s,--seed", seed, "RNG seed (-1: random)")->capture_default_str();
  app.add_option("-t,--threads", threads, "threads (default: all cores)");
  app.add_option("-c,--ctx-size", ctx, "context size (K suffix ok; 0: model's, at most 4096)")
      ->capture_default_str();
  app.add_option("-b,--batch-size", n_batch, "max tokens per prefill step")->capture_default_str();
  app.add_flag("--ignore-eos", o.ignore_eos, "keep generating past end-of-text tokens");
  app.add_flag("--special", o.special_pieces, "print control tokens");
  app.add_flag("-q,--quiet", quiet, "no perf summary on stderr");
  app.add_flag("--verbose-prompt", verbose_prompt, "print the prompt's token ids and pieces to stderr");
  strata::cli::EngramFlags ef;
  strata::cli::ExpertFlags xf;
  strata::cli::DeviceFlags df;  // outlives the model
  strata::cli::KvTypeFlags kf;
  xf.add(app);
  ef.add(app);
  df.add(app);
  strata::cli::add_kv_type_flags(app, kf, "f16");
  strata::cli::KvPoolFlags kpf;
  kpf.add(app);
  bool contiguous = false;
  app.add_flag(
      "--no-paged-kv", contiguous,
      "keep the sequence's KV contiguous in its session, its whole context allocated (no pool, no prefix "
      "cache: the layout before the pool, to compare)");
  strata::cli::ProfileFlags pf;
  strata::cli::add_profile_flags(app, pf);
  if (auto rc = strata::cli::parse_args(app, argc, argv, "run")) return *rc;
  auto c = strata::cli::parse_ctx(ctx);
  if (!c.ok()) return fail(c.message(), 2);
  auto kv = strata::cli::kv_types(kf, "f16");
  if (!kv.ok()) return fail(kv.message(), 2);
  auto knobs = strata::cli::seq_knobs(pf);
  if (!knobs.ok()) return fail(knobs.message(), 2);
  if (n_batch < 1) return fail("-b must be >= 1", 2);
  strata::EngineOptions eo;
  if (auto st = kpf.apply(&eo); !st.ok()) return fail(st.message(), 2);
  // No RAM tier unless the prefix cache persists (one request evicts nothing it could reuse;
  // `strata plan` prices run so).
  if (kpf.cache_ram.empty() && kpf.prefix_cache_dir.empty()) eo.cache_ram = 0;
  eo.paged_kv = !contiguous;
  if (contiguous && kpf.any()) return fail("--no-paged-kv takes none of the KV pool flags", 2);
  if (!prompt_file.empty()) {
    std::ifstream in(prompt_file, std::ios::binary);
    if (!in) return fail("cannot read prompt file '" + prompt_file + "'", 2);
    std::stringstream ss;
    ss << in.rdbuf();
    prompt = ss.str();
  }
  if (!tokens_str.empty() && !prompt.empty())
    return fail("give either a text prompt or --tokens, not both", 2);
  if (prompt.empty() && tokens_str.empty())
    return fail("no prompt: give -p PROMPT, -f FILE or --tokens IDS", 2);
  if (seed < -1 || seed >= static_cast<int64_t>(strata::kSamplerRandomSeed)) {
    return fail("--seed must be in [0, 4294967294] or -1 for random", 2);
  }
  o.sampling.seed = seed < 0 ? strata::kSamplerRandomSeed : static_cast<uint32_t>(seed);
  if (auto st = strata::sampler_params_validate(o.sampling); !st.ok()) return fail(st.message(), 2);

  const double t_load0 = strata::now_seconds();
  strata::LoadOptions lo{.n_threads = threads, .tokenizer_path = tokenizer_path};
  if (auto st = xf.apply(&lo); !st.ok()) return fail(st.message(), 2);
  if (auto st = ef.apply(&lo, model_path, xf); !st.ok()) return fail(st.message(), 2);
  if (auto st = df.apply(&lo); !st.ok()) return fail(st.message(), 2);
  auto model = strata::Model::load(model_path, lo);
  if (!model.ok()) return fail("loading " + model_path + ": " + model.message());
  strata::Model& m = **model;
  std::fputs(strata::cli::kv_types_note(m.arch().kv_spec(), *kv, m.arch().hparams().arch.c_str()).c_str(),
             stderr);
  const strata::SessionOptions sopt{.n_ctx = *c, .n_batch = n_batch, .kv = *kv};
  if (kpf.kv_budget.empty()) {
    if (auto st = place_experts(df, m, sopt, 1, xf.profile); !st.ok()) return fail(st.message());
  } else if (df.dev && m.hparams().n_expert > 0) {  // as serve: the KV budget where that is more
    auto kv_bytes = m.session_kv_bytes(sopt);
    if (!kv_bytes.ok()) return fail(kv_bytes.message());
    if (auto st = df.place_experts(m, std::max(*kv_bytes, eo.kv_budget), xf.profile); !st.ok())
      return fail(st.message());
  }
  // One slot, stepped on this thread; a prompt alone is one turn (split in -b token steps).
  eo.n_slots = 1;
  eo.max_queue = 0;
  eo.manual_step = true;
  eo.n_ubatch = n_batch;
  eo.n_batch = std::max(1, *c > 0 ? *c : std::min(m.n_ctx_train(), 4096));
  auto engine = strata::Engine::for_model(m, sopt, eo);
  if (!engine.ok()) return fail(engine.message());
  if (!(*engine)->kv_pool() && kpf.any())
    std::fprintf(stderr, "strata run: warning: %s has no paged KV: the KV pool flags are ignored\n",
                 m.arch_name().c_str());
  o.knobs = *knobs;
  const double load_s = strata::now_seconds() - t_load0;
  const std::string no_pool = contiguous ? "--no-paged-kv" : m.arch_name() + " has no paged KV";
  if (!tokens_str.empty()) {
    const int rc = run_token_ids(m, **engine, tokens_str, o, quiet, no_pool);
    if (rc != 0) return rc;
    engine->reset();  // --prefix-cache-dir: the cached blocks written
    if (auto st = xf.finish(m, quiet); !st.ok()) return fail(st.message());
    if (auto st = ef.finish(m, xf.stats_out, quiet); !st.ok()) return fail(st.message());
    return 0;
  }
  if (!(*model)->has_tokenizer())
    return fail(model_path +
                    " has no tokenizer (a checkpoint directory without tokenizer.json): give --tokenizer "
                    "FILE, or the "
                    "prompt as token ids with --tokens",
                2);

  if (verbose_prompt) {  // the same tokenization generate() does
    const auto& tok = (*model)->tokenizer();
    const auto ids = tok.encode(prompt, /*add_special=*/true, o.parse_special);
    std::fprintf(stderr, "strata: prompt is %zu tokens:\n", ids.size());
    for (int32_t id : ids) std::fprintf(stderr, "%8d -> '%s'\n", id, tok.token_to_piece(id, true).c_str());
  }

  auto stats = strata::generate(**engine, m.tokenizer(), prompt, o, [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (!stats.ok()) return fail(stats.message());
  if (!quiet) {
    const auto& s = *stats;
    std::fprintf(stderr, "\nstrata: model %s (%s), %d threads, ctx %d\n", model_path.c_str(),
                 m.arch_name().c_str(), m.pool().size(), (*engine)->n_ctx());
    std::fprintf(stderr, "strata: device    %s\n", df.describe(model->get()).c_str());
    std::fprintf(stderr, "strata: load      %8.2f ms\n", load_s * 1e3);
    std::fprintf(
        stderr, "strata: prompt    %8.2f ms / %4d tokens (%8.2f ms per token, %8.2f tokens per second)\n",
        s.prompt_s * 1e3, s.n_prompt, s.n_prompt ? s.prompt_s * 1e3 / s.n_prompt : 0.0, s.prompt_tps());
    std::fprintf(stderr,
                 "strata: generate  %8.2f ms / %4d runs   (%8.2f ms per token, %8.2f tokens per second)\n",
                 s.decode_s * 1e3, s.n_decode, s.n_decode ? s.decode_s * 1e3 / s.n_decode : 0.0, s.gen_tps());
    std::fprintf(stderr, "strata: sampled   %d tokens (%.2f ms sampling), stop: %s\n", s.n_gen,
                 s.sample_s * 1e3, strata::stop_reason_name(s.stop));
    const int64_t positions = s.n_prompt + s.n_cached + s.n_decode;
    std::fputs(strata::cli::kv_summary_text(**engine, no_pool, positions, s.n_cached, s.n_prompt + s.n_cached)
                   .c_str(),
               stderr);
    const strata::KvPool* pool = (*engine)->kv_pool();
    std::fputs(strata::cli::mem_report_text(
                   strata::cli::mem_report(m, (*engine)->session(0), n_batch, pool ? pool->bytes() : 0))
                   .c_str(),
               stderr);
  }
  engine->reset();  // --prefix-cache-dir: the cached blocks written
  if (auto st = xf.finish(m, quiet); !st.ok()) return fail(st.message());
  if (auto st = ef.finish(m, xf.stats_out, quiet); !st.ok()) return fail(st.message());
  return 0;
}

const strata::cli::Registrar reg{"run", "generate text from a prompt", &cmd_run};

}  // namespace
