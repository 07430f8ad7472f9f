// strata perplexity: perplexity of a text file over non-overlapping windows (runtime/perplexity.h;
// the same definition as train/reference_forward.py ppl). Per-window progress goes to stderr, the
// result to stdout: one line, or with --json one object
//   {"ppl", "nll", "windows", "scored_tokens", "ctx", "n_tokens", "model", "text", "seconds", ...}
// whose first keys match tests/data/*__ppl.json.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_args.h"
#include "command.h"
#include "model/model.h"
#include "runtime/perplexity.h"

namespace {

int fail(const std::string& msg, int code = 1) {
  std::fprintf(stderr, "strata perplexity: error: %s\n", msg.c_str());
  return code;
}

int cmd_perplexity(int argc, char** argv) {
  std::string model_path, text_path;
  int threads = 0, ctx = 0;
  bool json = false, quiet = false;
  strata::PerplexityOptions o;
  CLI::App app{"Perplexity of a text file over non-overlapping windows of -c tokens", "strata perplexity"};
  app.add_option("-m,--model", model_path, "GGUF model")->required();
  app.add_option("-f,--file", text_path, "text file (tokenized whole, no BOS)")->required();
  app.add_option("-c,--ctx-size", ctx,
                 "window length in tokens (0: the model's context_length, at most 4096)")
      ->capture_default_str();
  app.add_option("-t,--threads", threads, "threads (0: all cores)")->capture_default_str();
  app.add_option("-b,--batch-size", o.n_batch, "max tokens per eval step")->capture_default_str();
  app.add_flag("--json", json, "print the result as one JSON object");
  app.add_flag("-q,--quiet", quiet, "no per-window progress on stderr");
  strata::cli::KvTypeFlags kf;
  strata::cli::add_kv_type_flags(app, kf, "f32");
  strata::cli::ProfileFlags pf;
  strata::cli::add_profile_flags(app, pf);
  if (auto rc = strata::cli::parse_args(app, argc, argv, "perplexity")) return *rc;
  auto kv = strata::cli::kv_types(kf, "f32");
  if (!kv.ok()) return fail(kv.message(), 2);
  o.kv = *kv;
  auto knobs = strata::cli::seq_knobs(pf);
  if (!knobs.ok()) return fail(knobs.message(), 2);
  o.knobs = *knobs;
  if (ctx < 0 || ctx == 1)
    return fail("-c " + std::to_string(ctx) + ": the window must be >= 2 tokens (0: the model's context)", 2);
  if (ctx > (1 << 24)) return fail("-c " + std::to_string(ctx) + " is too large", 2);
  if (o.n_batch < 1) return fail("-b must be >= 1", 2);
  if (threads < 0) return fail("-t must be >= 0", 2);
  o.n_ctx = ctx;

  // Read the text before loading the model: a wrong path fails fast.
  auto text = strata::read_text_file(text_path);
  if (!text.ok()) return fail(text.message());

  strata::LoadOptions lo;
  lo.n_threads = threads;
  auto model = strata::Model::load(model_path, lo);
  if (!model.ok()) return fail(model.message());
  const strata::Model& m = **model;
  std::fputs(strata::cli::kv_types_note(m.arch().kv_spec(), *kv, m.arch().hparams().arch.c_str()).c_str(),
             stderr);
  if (!m.has_tokenizer())
    return fail(model_path + " has no tokenizer (a checkpoint directory): perplexity needs text");

  // Tokenized here (not by perplexity_of_text) so the header can say how many windows there are.
  const std::vector<int32_t> tokens =
      m.tokenizer().encode(*text, /*add_special=*/false, /*parse_special=*/false);
  const int n_ctx = strata::perplexity_ctx(m, o);
  strata::PerplexityProgress progress;
  // Quiet when the run is about to fail, so an error stays one line.
  if (!quiet && n_ctx >= 2 && tokens.size() >= static_cast<size_t>(n_ctx)) {
    std::fprintf(stderr,
                 "strata perplexity: %s, %zu tokens, %zu windows of %d (context_length %d), %d threads\n",
                 std::filesystem::path(model_path).filename().c_str(), tokens.size(), tokens.size() / n_ctx,
                 n_ctx, m.n_ctx_train(), m.pool().size());
    progress = [](const strata::PerplexityWindow& w) {
      std::fprintf(stderr, "[%d/%d] ppl %10.4f   running %10.4f   %.2f s\n", w.index + 1, w.n_windows, w.ppl,
                   w.ppl_running, w.seconds);
    };
  }
  auto r = strata::perplexity(m, tokens, o, progress);
  if (!r.ok()) return fail(r.message());

  if (json) {
    nlohmann::ordered_json j;
    j["ppl"] = r->ppl;
    j["nll"] = r->nll;
    j["windows"] = r->windows;
    j["scored_tokens"] = r->scored_tokens;
    j["ctx"] = r->n_ctx;
    j["n_tokens"] = r->n_tokens;
    j["model"] = std::filesystem::path(model_path).filename().string();
    j["text"] = std::filesystem::path(text_path).filename().string();
    j["seconds"] = r->seconds;
    j["tokens_per_second"] = r->tokens_per_second();
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf(
        "perplexity: %.4f  (mean NLL %.6f over %lld scored tokens; %d windows of %d; %lld tokens, %lld "
        "dropped; %.2f s, %.1f tokens/s)\n",
        r->ppl, r->nll, static_cast<long long>(r->scored_tokens), r->windows, r->n_ctx,
        static_cast<long long>(r->n_tokens),
        static_cast<long long>(r->n_tokens - int64_t{r->windows} * r->n_ctx), r->seconds,
        r->tokens_per_second());
  }
  if (std::fflush(stdout) != 0) return fail("cannot write the output");
  return 0;
}

const strata::cli::Registrar reg{"perplexity", "perplexity of a text file over windows of -c tokens",
                                 &cmd_perplexity};

}  // namespace
