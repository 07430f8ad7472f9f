// strata kld: what quantization cost — KL divergence, top-1 agreement, ΔPPL and per-layer routing
// consistency of a quantized model against its reference over a text (runtime/kl_divergence.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_args.h"
#include "command.h"
#include "model/model.h"
#include "runtime/kl_divergence.h"
#include "runtime/kld_base.h"
#include "runtime/perplexity.h"

namespace {

int fail(const std::string& msg, int code = 1) {
  std::fprintf(stderr, "strata kld: error: %s\n", msg.c_str());
  return code;
}

int cmd_kld(int argc, char** argv) {
  std::string quant_path, ref_path, text_path, base_path;
  int threads = 0;
  bool json = false, quiet = false;
  strata::KldOptions o;
  CLI::App app{
      "KL divergence, top-1 agreement, dPPL and routing consistency of a quantized model vs a reference",
      "strata kld"};
  app.add_option("-m,--model", quant_path, "quantized GGUF model")->required();
  app.add_option("--ref", ref_path, "reference GGUF model (same vocabulary)");
  app.add_option("-f,--file", text_path, "text file (tokenized whole, no BOS)");
  app.add_option(
      "--kl-divergence-base", base_path,
      "instead of --ref and -f: reference log-probs saved by llama-perplexity --kl-divergence-base "
      "(its tokens, window and second halves; routing not measured)");
  app.add_option("-c,--ctx-size", o.n_ctx, "window length (0: the reference's context_length, at most 4096)")
      ->capture_default_str();
  app.add_option("-b,--batch-size", o.n_batch, "max tokens per eval step")->capture_default_str();
  app.add_option("-t,--threads", threads, "threads (0: all cores)")->capture_default_str();
  app.add_flag("--second-half", o.second_half,
               "score only the second half of each window (as llama-perplexity --kl-divergence)");
  app.add_flag("--json", json, "print the result as one JSON object");
  app.add_flag("-q,--quiet", quiet, "no per-window progress on stderr");
  // -ctk / -ctv / --kv-type: the -m model's KV types (the reference keeps f32 KV): with --ref the
  // same file, the KL divergence a KV type costs.
  strata::cli::KvTypeFlags kf;
  strata::cli::add_kv_type_flags(app, kf, "f32");
  // --profile / --expert-min-share: the -m model's (the reference runs without): with --ref the
  // same file, the KL divergence a profile costs.
  strata::cli::ProfileFlags pf;
  strata::cli::add_profile_flags(app, pf);
  if (auto rc = strata::cli::parse_args(app, argc, argv, "kld")) return *rc;
  auto kv = strata::cli::kv_types(kf, "f32");
  if (!kv.ok()) return fail(kv.message(), 2);
  o.kv = *kv;
  auto knobs = strata::cli::seq_knobs(pf);
  if (!knobs.ok()) return fail(knobs.message(), 2);
  o.knobs = *knobs;
  if (o.n_ctx < 0 || o.n_ctx == 1 || o.n_ctx > (1 << 24)) return fail("-c must be 0 or in 2..2^24", 2);
  if (o.n_batch < 1) return fail("-b must be >= 1", 2);
  if (threads < 0) return fail("-t must be >= 0", 2);
  if (base_path.empty() && (ref_path.empty() || text_path.empty()))
    return fail("give --ref and -f, or --kl-divergence-base", 2);
  if (!base_path.empty() && (!ref_path.empty() || !text_path.empty()))
    return fail("--kl-divergence-base replaces --ref and -f (its file holds the tokens and the reference)",
                2);
  strata::KldProgress progress;
  if (!quiet) {
    progress = [](int w, int n, double kld) {
      std::fprintf(stderr, "[%d/%d] mean KLD %.6f\n", w + 1, n, kld);
    };
  }
  strata::Result<strata::KldResult> r = strata::err("no run");
  if (!base_path.empty()) {
    auto base = strata::read_kld_base(base_path);
    if (!base.ok()) return fail(base.message());
    auto m = strata::Model::load(quant_path, {.n_threads = threads});
    if (!m.ok()) return fail(quant_path + ": " + m.message());
    o.second_half = true;  // the file holds the second halves only
    r = strata::kl_divergence_vs_base(**m, *base, o, progress);
  } else {
    auto text = strata::read_text_file(text_path);
    if (!text.ok()) return fail(text.message());
    r = strata::kl_divergence_of_files(quant_path, ref_path, *text, o, threads, progress);
  }
  if (!r.ok()) return fail(r.message());
  double route_mean = 0;
  int route_n = 0;
  for (double v : r->routing) {
    if (v >= 0) {
      route_mean += v;
      route_n++;
    }
  }
  route_mean = route_n ? route_mean / route_n : -1;
  if (json) {
    nlohmann::ordered_json j;
    j["kld_mean"] = r->kld_mean;
    j["kld_p99"] = r->kld_p99;
    j["kld_max"] = r->kld_max;
    j["kld_median"] = r->kld_median;
    j["top1_agree"] = r->top1_agree;
    j["ppl_quant"] = r->ppl_quant;
    j["ppl_ref"] = r->ppl_ref;
    j["dppl"] = r->dppl();
    j["routing"] = nlohmann::json::array();
    for (double v : r->routing) j["routing"].push_back(v);
    j["routing_mean"] = route_mean;
    j["scored"] = r->scored;
    j["windows"] = r->windows;
    j["ctx"] = r->n_ctx;
    j["seconds"] = r->seconds;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("windows %d of %d, %lld scored positions%s\n", r->windows, r->n_ctx,
                static_cast<long long>(r->scored), o.second_half ? " (second halves)" : "");
    std::printf("KLD        mean %.6f   median %.6f   P99 %.6f   max %.6f\n", r->kld_mean, r->kld_median,
                r->kld_p99, r->kld_max);
    std::printf("top-1      agreement %.4f\n", r->top1_agree);
    std::printf("PPL        quant %.4f   ref %.4f   dPPL %+.4f (%+.2f%%)\n", r->ppl_quant, r->ppl_ref,
                r->dppl(), 100.0 * r->dppl() / r->ppl_ref);
    if (route_n) {
      std::printf("routing    mean |top-k(quant) & top-k(ref)| / k per layer:");
      for (size_t l = 0; l < r->routing.size(); ++l) {
        if (r->routing[l] >= 0) std::printf(" %zu:%.4f", l, r->routing[l]);
      }
      std::printf("   (mean %.4f)\n", route_mean);
    }
  }
  if (std::fflush(stdout) != 0) return fail("cannot write the output");
  return 0;
}

const strata::cli::Registrar reg{
    "kld", "KL divergence and routing consistency of a quantized model vs its reference", &cmd_kld};

}  // namespace
