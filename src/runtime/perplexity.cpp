#include "runtime/perplexity.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "base/clock.h"
#include "runtime/generate.h"

namespace strata {

int perplexity_ctx(const Model& model, const PerplexityOptions& opts) {
  if (opts.n_ctx > 0) return opts.n_ctx;
  return std::min(model.n_ctx_train(), kPerplexityDefaultCtxCap);
}

double token_nll(const float* logits, int n_vocab, int32_t target) {
  STRATA_ASSERT(n_vocab > 0 && target >= 0 && target < n_vocab);
  float mx = logits[0];
  for (int v = 1; v < n_vocab; ++v) mx = std::max(mx, logits[v]);
  // A NaN anywhere must poison the result (std::max above may skip it).
  double sum = 0;
  for (int v = 0; v < n_vocab; ++v) sum += std::exp(double(logits[v]) - double(mx));
  return double(mx) + std::log(sum) - double(logits[target]);
}

Result<PerplexityResult> perplexity(const Model& model, std::span<const int32_t> tokens,
                                    const PerplexityOptions& opts, const PerplexityProgress& on_window) {
  const int ctx = perplexity_ctx(model, opts);
  if (ctx < 2)
    return err("perplexity: context %d is too small (need >= 2: one token scored per window)", ctx);
  if (opts.n_batch < 1) return err("perplexity: batch %d must be >= 1", opts.n_batch);
  const int64_t n_tok = static_cast<int64_t>(tokens.size());
  const int64_t n_win64 = n_tok / ctx;
  if (n_win64 == 0)
    return err(
        "perplexity: text has %lld tokens, fewer than one window of %d (use a longer text or a smaller "
        "window)",
        static_cast<long long>(n_tok), ctx);
  if (n_win64 > INT32_MAX) return err("perplexity: too many windows (%lld)", static_cast<long long>(n_win64));
  const int n_win = static_cast<int>(n_win64);

  const int V = model.n_vocab();
  // The logits of one chunk are [nb, n_vocab] f32; keep that under kMaxLogitsBytes even for big
  // vocabularies (512 x 150k would be 300 MiB).
  constexpr size_t kMaxLogitsBytes = size_t{128} << 20;
  const int nb_cap = static_cast<int>(std::max<size_t>(1, kMaxLogitsBytes / sizeof(float) / std::max(V, 1)));
  SessionOptions so;
  so.n_ctx = ctx;
  so.n_batch = std::min({opts.n_batch, ctx, nb_cap});
  so.kv = opts.kv;
  STRATA_ASSIGN(auto sess, model.new_session(so));
  sess->set_knobs(opts.knobs);
  const int nb = so.n_batch;

  PerplexityResult r;
  r.n_ctx = ctx;
  r.windows = n_win;
  r.n_tokens = n_tok;
  double nll_total = 0;
  const double t_start = now_seconds();
  for (int w = 0; w < n_win; ++w) {
    const double t0 = now_seconds();
    const std::span<const int32_t> win = tokens.subspan(static_cast<size_t>(w) * ctx, ctx);
    double nll_win = 0;
    std::string problem;
    // The window through the engine (runtime/generate.h score), in steps of nb tokens: row j of a
    // step at s holds the logits after position s+j; they score the token at s+j+1.
    const Status st = score(model, *sess, V, win, nb, [&](int64_t s, std::span<const float> rows) {
      const int64_t n = static_cast<int64_t>(rows.size()) / V;
      for (int64_t j = 0; j < n && s + j + 1 < ctx; ++j) {
        const int32_t target = win[static_cast<size_t>(s + j + 1)];
        if (target < 0 || target >= V) {
          problem = err("token id %d at position %lld of window %d is outside the vocabulary (%d)", target,
                        static_cast<long long>(s + j + 1), w, V)
                        .message;
          return false;
        }
        const double nll = token_nll(rows.data() + static_cast<size_t>(j) * V, V, target);
        if (!std::isfinite(nll)) {
          problem = err("non-finite logits at position %lld of window %d", static_cast<long long>(s + j), w)
                        .message;
          return false;
        }
        nll_win += nll;
      }
      return true;
    });
    if (!problem.empty()) return err("perplexity: %s", problem.c_str());
    if (!st.ok()) return err("perplexity: window %d: %s", w, st.message().c_str());
    nll_total += nll_win;
    if (on_window) {
      PerplexityWindow pw;
      pw.index = w;
      pw.n_windows = n_win;
      pw.nll_sum = nll_win;
      pw.ppl = std::exp(nll_win / (ctx - 1));
      pw.ppl_running = std::exp(nll_total / (double(w + 1) * (ctx - 1)));
      pw.seconds = now_seconds() - t0;
      on_window(pw);
    }
  }
  r.seconds = now_seconds() - t_start;
  r.scored_tokens = int64_t{n_win} * (ctx - 1);
  r.nll = nll_total / double(r.scored_tokens);
  r.ppl = std::exp(r.nll);
  return r;
}

Result<PerplexityResult> perplexity_of_text(const Model& model, std::string_view text,
                                            const PerplexityOptions& opts,
                                            const PerplexityProgress& on_window) {
  const std::vector<int32_t> ids =
      model.tokenizer().encode(text, /*add_special=*/false, /*parse_special=*/false);
  return perplexity(model, ids, opts, on_window);
}

Result<std::string> read_text_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return err("'%s' is a directory, not a text file", path.c_str());
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return err("cannot open '%s': %s", path.c_str(), std::strerror(errno));
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const bool bad = std::ferror(f);
  const int saved = errno;
  std::fclose(f);
  if (bad) return err("cannot read '%s': %s", path.c_str(), std::strerror(saved));
  return out;
}

}  // namespace strata
