// `strata inspect --kv (-m MODEL.gguf | --config config.json) [-c CTX] [--json]`: the KV memory
// bill of a model (src/memory/kv_bill.h) — bytes per token for each cache kind at each KV type,
// the fixed per-sequence state, and the total for a context length. --config reads a Hugging
// Face config.json, so the bill can be made before downloading the weights.
#include "inspect_kv.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "format/gguf.h"
#include "memory/plan/kv_bill.h"

int inspect_kv_main(int argc, char** argv) {
  std::string model, config;
  int64_t n_ctx = 0;
  bool json = false, kv = false;
  CLI::App app{"KV memory bill: KV-cache bytes per token, fixed per-sequence state, total for a context",
               "strata inspect --kv"};
  auto* m = app.add_option("-m,--model", model, "GGUF file");
  auto* c = app.add_option("--config", config, "Hugging Face config.json (no weights needed)");
  m->excludes(c);
  app.add_option("-c,--ctx", n_ctx, "context length in tokens (default: the model's training context)");
  app.add_flag("--json", json, "print the bill as JSON");
  app.add_flag("--kv", kv, "KV view (this command)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "strata inspect --kv: error: %s\n", e.what());
    return 2;
  }
  if (model.empty() == config.empty()) {
    std::fprintf(stderr,
                 "strata inspect --kv: error: give exactly one of -m MODEL.gguf or --config config.json\n");
    return 2;
  }
  if (n_ctx < 0) {
    std::fprintf(stderr, "strata inspect --kv: error: -c %lld: context must be positive\n", (long long)n_ctx);
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
  const std::string out = json ? strata::kv_bill_json(bill, n_ctx) : strata::kv_bill_text(bill, n_ctx);
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (json) std::fputc('\n', stdout);
  return 0;
}
