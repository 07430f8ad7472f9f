// strata imatrix: the importance matrix of a model over a calibration text (Σ x² per input column
// of each matmul weight, experts per expert; runtime/imatrix_collect.h), written in llama.cpp's
// GGUF imatrix format for `strata quantize --imatrix` or `llama-quantize --imatrix`.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <string>

#include "cli_args.h"
#include "command.h"
#include "model/model.h"
#include "runtime/imatrix_collect.h"
#include "runtime/perplexity.h"

namespace {

int fail(const std::string& msg, int code = 1) {
  std::fprintf(stderr, "strata imatrix: error: %s\n", msg.c_str());
  return code;
}

int cmd_imatrix(int argc, char** argv) {
  std::string model_path, text_path, out_path = "imatrix.gguf";
  int threads = 0;
  bool quiet = false;
  strata::ImatrixCollectOptions o;
  CLI::App app{"Importance matrix (llama.cpp's GGUF imatrix format) of a model over a calibration text",
               "strata imatrix"};
  app.add_option("-m,--model", model_path, "GGUF model")->required();
  app.add_option("-f,--file", text_path, "calibration text (tokenized whole, no BOS)")->required();
  app.add_option("-o,--output", out_path, "output imatrix GGUF")->capture_default_str();
  app.add_option("-c,--ctx-size", o.n_ctx, "chunk length in tokens (0: the model's context, at most 4096)")
      ->capture_default_str();
  app.add_option("-b,--batch-size", o.n_batch, "max tokens per eval step")->capture_default_str();
  app.add_option("-t,--threads", threads, "threads (0: all cores)")->capture_default_str();
  app.add_flag("--process-output", o.process_output, "collect output.weight too (llama-imatrix's flag)");
  app.add_flag("-q,--quiet", quiet, "no per-chunk progress on stderr");
  if (auto rc = strata::cli::parse_args(app, argc, argv, "imatrix")) return *rc;
  if (o.n_ctx < 0 || o.n_ctx == 1) return fail("-c must be 0 or >= 2", 2);
  if (o.n_batch < 1) return fail("-b must be >= 1", 2);
  if (threads < 0) return fail("-t must be >= 0", 2);
  auto text = strata::read_text_file(text_path);
  if (!text.ok()) return fail(text.message());
  o.dataset = std::filesystem::path(text_path).filename().string();
  strata::LoadOptions lo;
  lo.n_threads = threads;
  auto model = strata::Model::load(model_path, lo);
  if (!model.ok()) return fail(model.message());
  strata::ImatrixProgress progress;
  if (!quiet) progress = [](int c, int n) { std::fprintf(stderr, "[%d/%d] chunks\n", c + 1, n); };
  auto m = strata::collect_imatrix(**model, *text, o, progress);
  if (!m.ok()) return fail(m.message());
  if (auto st = strata::write_imatrix(*m, out_path); !st.ok()) return fail(st.message());
  std::printf("wrote %s: %zu matrices, %u chunks of %u tokens\n", out_path.c_str(), m->entries.size(),
              m->chunk_count, m->chunk_size);
  return 0;
}

const strata::cli::Registrar reg{
    "imatrix", "importance matrix of a model over a calibration text (llama.cpp's format)", &cmd_imatrix};

}  // namespace
