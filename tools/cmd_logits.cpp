// strata logits: evaluate a token sequence and dump every position's logits as raw float32 LE
// [n_tokens][n_vocab] — the layout of the llama.cpp fixtures (shared/fixtures/README.md §3), so
// tools/check_fixture.py can compare them.
//   batch:        one eval of all tokens (the prompt path)
//   incremental:  one eval per token (the decode path, through the KV cache)
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_args.h"
#include "command.h"
#include "engram_flags.h"
#include "device_flags.h"
#include "expert_flags.h"
#include "model/model.h"
#include "runtime/generate.h"

namespace {

bool parse_tokens(const std::string& text, std::vector<int32_t>* out, std::string* msg) {
  std::string s = text;
  for (char& c : s)
    if (c == ',' || c == '\n' || c == '\t' || c == '\r') c = ' ';
  std::istringstream is(s);
  std::string tok;
  while (is >> tok) {
    char* end = nullptr;
    const long long v = std::strtoll(tok.c_str(), &end, 10);
    if (!end || *end != '\0' || v < 0 || v > INT32_MAX) {
      *msg = "bad token id '" + tok + "'";
      return false;
    }
    out->push_back(static_cast<int32_t>(v));
  }
  if (out->empty()) {
    *msg = "no tokens given";
    return false;
  }
  return true;
}

int cmd_logits(int argc, char** argv) {
  std::string model_path, tokens_str, tokens_file, out_path, mode = "batch";
  int n_threads = 0, n_ctx = 0, n_batch = 512;
  CLI::App app{"Evaluate tokens and write all logits as float32 [n_tokens][n_vocab]", "strata logits"};
  app.add_option("-m,--model", model_path, "GGUF model, or a checkpoint directory with config.json")
      ->required();
  auto* t1 = app.add_option("--tokens", tokens_str, "token ids, comma separated (1,2,3)");
  auto* t2 =
      app.add_option("--tokens-file", tokens_file, "file with token ids (comma / whitespace separated)");
  t1->excludes(t2);
  app.add_option("-o,--out", out_path, "output file (raw float32 little-endian)")->required();
  app.add_option("--mode", mode, "batch: one eval; incremental: one eval per token")
      ->check(CLI::IsMember({"batch", "incremental"}))
      ->capture_default_str();
  app.add_option("-t,--threads", n_threads, "threads (0: all cores)")->capture_default_str();
  app.add_option("-c,--ctx", n_ctx, "context size (0: max(n_tokens, 16))")->capture_default_str();
  app.add_option("-b,--batch", n_batch, "max tokens per internal step")->capture_default_str();
  strata::cli::ExpertFlags xf;
  xf.add(app);
  strata::cli::EngramFlags ef;
  ef.add(app);
  strata::cli::DeviceFlags df;  // outlives the model
  df.add(app);
  if (auto rc = strata::cli::parse_args(app, argc, argv, "logits")) return *rc;

  std::vector<int32_t> tokens;
  std::string msg, text = tokens_str;
  if (!tokens_file.empty()) {
    std::ifstream in(tokens_file);
    if (!in) {
      std::fprintf(stderr, "strata logits: error: cannot open tokens file '%s'\n", tokens_file.c_str());
      return 1;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  } else if (tokens_str.empty()) {
    std::fprintf(stderr, "strata logits: error: give --tokens or --tokens-file\n");
    return 2;
  }
  if (!parse_tokens(text, &tokens, &msg)) {
    std::fprintf(stderr, "strata logits: error: %s\n", msg.c_str());
    return 2;
  }

  strata::LoadOptions lo;
  lo.n_threads = n_threads;
  if (auto st = xf.apply(&lo); !st.ok()) {
    std::fprintf(stderr, "strata logits: error: %s\n", st.message().c_str());
    return 2;
  }
  if (auto st = ef.apply(&lo, model_path, xf); !st.ok()) {
    std::fprintf(stderr, "strata logits: error: %s\n", st.message().c_str());
    return 2;
  }
  if (auto st = df.apply(&lo); !st.ok()) {
    std::fprintf(stderr, "strata logits: error: %s\n", st.message().c_str());
    return 2;
  }
  auto model = strata::Model::load(model_path, lo);
  if (!model.ok()) {
    std::fprintf(stderr, "strata logits: error: %s\n", model.message().c_str());
    return 1;
  }
  strata::SessionOptions so;
  so.n_ctx = n_ctx > 0 ? n_ctx : std::max<int>(16, static_cast<int>(tokens.size()));
  so.n_batch = n_batch;
  if (auto st = place_experts(df, **model, so, 1, xf.profile); !st.ok()) {
    std::fprintf(stderr, "strata logits: error: %s\n", st.message().c_str());
    return 1;
  }
  auto sess = model.value()->new_session(so);
  if (!sess.ok()) {
    std::fprintf(stderr, "strata logits: error: %s\n", sess.message().c_str());
    return 1;
  }
  const size_t V = static_cast<size_t>(model.value()->n_vocab());
  std::vector<float> logits(tokens.size() * V);
  // Through the serving engine (one scoring request): the whole sequence in steps of n_batch
  // tokens (batch), or one token per step (incremental).
  const int chunk = mode == "batch" ? static_cast<int>(tokens.size()) : 1;
  const strata::Status s = strata::score(**model, **sess, static_cast<int32_t>(V), tokens, chunk,
                                         [&](int64_t pos0, std::span<const float> rows) {
                                           std::copy(rows.begin(), rows.end(), logits.begin() + pos0 * V);
                                           return true;
                                         });
  if (!s.ok()) {
    std::fprintf(stderr, "strata logits: error: %s\n", s.message().c_str());
    return 1;
  }
  FILE* f = std::fopen(out_path.c_str(), "wb");
  if (!f) {
    std::fprintf(stderr, "strata logits: error: cannot write '%s'\n", out_path.c_str());
    return 1;
  }
  const size_t wrote = std::fwrite(logits.data(), sizeof(float), logits.size(), f);
  const bool ok = std::fclose(f) == 0 && wrote == logits.size();
  if (!ok) {
    std::fprintf(stderr, "strata logits: error: short write to '%s'\n", out_path.c_str());
    return 1;
  }
  std::fprintf(stderr, "strata logits: %zu tokens x %zu vocab (%s, %s) -> %s\n", tokens.size(), V,
               mode.c_str(), df.describe(model->get()).c_str(), out_path.c_str());
  if (auto st = xf.finish(**model); !st.ok()) {
    std::fprintf(stderr, "strata logits: error: %s\n", st.message().c_str());
    return 1;
  }
  if (auto st = ef.finish(**model, xf.stats_out); !st.ok()) {
    std::fprintf(stderr, "strata logits: error: %s\n", st.message().c_str());
    return 1;
  }
  return 0;
}

const strata::cli::Registrar reg{"logits", "dump the logits of a token sequence (float32 [n][n_vocab])",
                                 &cmd_logits};

}  // namespace
