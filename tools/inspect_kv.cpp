// `strata inspect --kv (-m MODEL.gguf | --config config.json) [-c CTX] [-ub N] [--json]`: the KV
// memory bill of a model (plan/kv_bill.h: its architecture's KV spec) — bytes per token for each cache kind
// at each KV type, the fixed per-sequence state, and the total for a context length. --config reads a Hugging
// Face config.json, so the bill can be made before downloading the weights.
#include "inspect_kv.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "cli_args.h"
#include "format/gguf.h"
#include "plan/kv_bill.h"

int inspect_kv_main(int argc, char** argv) {
  std::string model, config;
  int64_t n_ctx = 0, n_ubatch = 512;
  bool json = false, kv = false;
  CLI::App app{"KV memory bill: KV-cache bytes per token, fixed per-sequence state, total for a context",
               "strata inspect --kv"};
  auto* m = app.add_option("-m,--model", model, "GGUF file");
  auto* c = app.add_option("--config", config, "Hugging Face config.json (no weights needed)");
  m->excludes(c);
  app.add_option("-c,--ctx", n_ctx, "context length in tokens (default: the model's training context)");
  app.add_option("--ubatch-size", n_ubatch,
                 "tokens per forward step (default 512): window rings hold window - 1 + this many rows");
  app.add_flag("--json", json, "print the bill as JSON");
  app.add_flag("--kv", kv, "KV view (this command)");
  if (auto rc = strata::cli::parse_args(app, argc, argv, "inspect --kv")) return *rc;
  if (model.empty() == config.empty()) {
    std::fprintf(stderr,
                 "strata inspect --kv: error: give exactly one of -m MODEL.gguf or --config config.json\n");
    return 2;
  }
  if (n_ctx < 0) {
    std::fprintf(stderr, "strata inspect --kv: error: -c %lld: context must be positive\n", (long long)n_ctx);
    return 2;
  }
  if (n_ubatch < 1) {
    std::fprintf(stderr, "strata inspect --kv: error: -ub %lld: must be >= 1\n", (long long)n_ubatch);
    return 2;
  }
  strata::Result<strata::KvModelSpec> spec = strata::err("no model");
  if (!model.empty()) {
    auto f = strata::GgufFile::open(model);
    if (!f.ok()) {
      std::fprintf(stderr, "strata inspect --kv: error: %s\n", f.message().c_str());
      return 1;
    }
    spec = strata::kv_spec_from_gguf(**f);
  } else {
    spec = strata::kv_spec_from_hf_config(config);
  }
  if (!spec.ok()) {
    std::fprintf(stderr, "strata inspect --kv: error: %s\n", spec.message().c_str());
    return 1;
  }
  if (n_ctx == 0) n_ctx = spec->n_ctx_train > 0 ? spec->n_ctx_train : 4096;
  const strata::KvBill bill = strata::kv_bill_make(*spec);
  const std::string out =
      json ? strata::kv_bill_json(bill, n_ctx, n_ubatch) : strata::kv_bill_text(bill, n_ctx, n_ubatch);
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (json) std::fputc('\n', stdout);
  return 0;
}
