#include "runtime/kld_base.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <memory>

#include "base/clock.h"

namespace strata {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

}  // namespace

Result<KldBase> read_kld_base(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) return err("%s: cannot open (%s)", path.c_str(), std::strerror(errno));
  char magic[8];
  uint32_t n_ctx = 0;
  int32_t n_vocab = 0, n_chunk = 0;
  if (std::fread(magic, 1, 8, f.get()) != 8 || std::memcmp(magic, "_logits_", 8) != 0)
    return err("%s: not a llama-perplexity --kl-divergence-base file (no \"_logits_\" header)", path.c_str());
  if (std::fread(&n_ctx, 4, 1, f.get()) != 1 || std::fread(&n_vocab, 4, 1, f.get()) != 1 ||
      std::fread(&n_chunk, 4, 1, f.get()) != 1)
    return err("%s: truncated header", path.c_str());
  if (n_ctx < 4 || n_ctx > (1u << 20) || n_vocab < 2 || n_vocab > (1 << 24) || n_chunk < 1 ||
      n_chunk > (1 << 20))
    return err("%s: implausible header (n_ctx %u, n_vocab %d, n_chunk %d)", path.c_str(), n_ctx, n_vocab,
               n_chunk);
  KldBase b;
  b.n_ctx = static_cast<int>(n_ctx);
  b.n_vocab = n_vocab;
  b.n_chunk = n_chunk;
  b.tokens.resize(static_cast<size_t>(n_ctx) * static_cast<size_t>(n_chunk));
  if (std::fread(b.tokens.data(), 4, b.tokens.size(), f.get()) != b.tokens.size())
    return err("%s: truncated: fewer than the %zu tokens the header announces", path.c_str(),
               b.tokens.size());
  const size_t n_rows = static_cast<size_t>(n_chunk) * static_cast<size_t>(b.rows_per_chunk());
  b.rows.resize(n_rows * b.row_stride());
  if (const size_t got = std::fread(b.rows.data(), 2, b.rows.size(), f.get()); got != b.rows.size())
    return err("%s: truncated: %zu of %zu log-probability rows", path.c_str(), got / b.row_stride(), n_rows);
  return b;
}

Status write_kld_base(const std::string& path, int n_ctx, int n_vocab, const std::vector<int32_t>& tokens,
                      const std::vector<float>& logits) {
  KldBase b;
  b.n_ctx = n_ctx;
  b.n_vocab = n_vocab;
  b.n_chunk = static_cast<int>(tokens.size() / static_cast<size_t>(n_ctx));
  const auto n_rows = static_cast<size_t>(b.n_chunk) * static_cast<size_t>(b.rows_per_chunk());
  if (b.n_chunk < 1 || tokens.size() % static_cast<size_t>(n_ctx) || logits.size() != n_rows * n_vocab)
    return err("write_kld_base: %zu tokens / %zu logits do not make whole chunks of %d", tokens.size(),
               logits.size(), n_ctx);
  File f(std::fopen(path.c_str(), "wb"));
  if (!f) return err("%s: cannot create (%s)", path.c_str(), std::strerror(errno));
  const auto u_ctx = static_cast<uint32_t>(n_ctx);
  bool ok = std::fwrite("_logits_", 1, 8, f.get()) == 8 && std::fwrite(&u_ctx, 4, 1, f.get()) == 1 &&
            std::fwrite(&n_vocab, 4, 1, f.get()) == 1 && std::fwrite(&b.n_chunk, 4, 1, f.get()) == 1 &&
            std::fwrite(tokens.data(), 4, tokens.size(), f.get()) == tokens.size();
  std::vector<uint16_t> row(b.row_stride(), 0);
  for (size_t r = 0; r < n_rows && ok; ++r) {
    const float* x = logits.data() + r * static_cast<size_t>(n_vocab);
    const float mx = *std::max_element(x, x + n_vocab);
    const float mn = std::max(*std::min_element(x, x + n_vocab), mx - 16);
    double sum = 0;
    for (int v = 0; v < n_vocab; ++v) sum += std::exp(double(x[v]) - mx);
    const float scale = (mx - mn) / 65535.0f, min_lp = mn - mx - static_cast<float>(std::log(sum));
    std::memcpy(row.data(), &scale, 4);
    std::memcpy(row.data() + 2, &min_lp, 4);
    for (int v = 0; v < n_vocab; ++v)
      row[4 + static_cast<size_t>(v)] =
          scale > 0 && x[v] > mn ? static_cast<uint16_t>(std::lround((x[v] - mn) / scale)) : uint16_t{0};
    ok = std::fwrite(row.data(), 2, row.size(), f.get()) == row.size();
  }
  if (!ok || std::fflush(f.get()) != 0) return err("%s: write failed", path.c_str());
  return {};
}

Result<KldResult> kl_divergence_vs_base(const Model& m, const KldBase& base, const KldOptions& opts,
                                        const KldProgress& progress) {
  const int V = m.n_vocab(), ctx = base.n_ctx, first = ctx / 2;
  if (base.n_vocab != V)
    return err("kld: the base file's vocabulary has %d tokens, the model's %d", base.n_vocab, V);
  for (size_t i = 0; i < base.tokens.size(); ++i)
    if (base.tokens[i] < 0 || base.tokens[i] >= V)
      return err("kld: the base file's token %zu (id %d) is outside the vocabulary (%d)", i, base.tokens[i],
                 V);
  SessionOptions so;
  so.n_ctx = ctx;
  so.n_batch = std::clamp(opts.n_batch, 1, ctx);
  so.kv = opts.kv;
  STRATA_ASSIGN(auto s, m.new_session(so));
  s->set_knobs(opts.knobs);
  const Tokenizer& tok = m.tokenizer();
  const int32_t bos = tok.add_bos() ? tok.bos_id() : -1;
  std::vector<float> logits(static_cast<size_t>(so.n_batch) * V);
  std::vector<double> klds;
  double nll = 0, nll_base = 0, kl_sum = 0;
  int64_t agree = 0;
  KldResult r;
  r.n_ctx = ctx;
  r.windows = base.n_chunk;
  const double t0 = now_seconds();
  for (int c = 0; c < base.n_chunk; ++c) {
    std::vector<int32_t> win(base.tokens.begin() + static_cast<ptrdiff_t>(c) * ctx,
                             base.tokens.begin() + static_cast<ptrdiff_t>(c + 1) * ctx);
    if (bos >= 0) win[0] = bos;
    s->reset();
    for (int p0 = 0; p0 < ctx - 1; p0 += so.n_batch) {
      const int n = std::min(so.n_batch, ctx - 1 - p0);
      STRATA_TRY(
          s->eval(std::span<const int32_t>(win.data() + p0, static_cast<size_t>(n)), logits.data(), true));
      for (int j = 0; j < n; ++j) {
        const int p = p0 + j;
        if (p < first) continue;
        const float* x = logits.data() + static_cast<size_t>(j) * V;
        double mx = x[0];
        int top = 0;
        for (int v = 1; v < V; ++v)
          if (x[v] > mx) mx = x[v], top = v;
        if (!std::isfinite(mx)) return err("kld: non-finite logits at chunk %d position %d", c, p);
        double sum = 0;
        for (int v = 0; v < V; ++v) sum += std::exp(double(x[v]) - mx);
        const double lse = mx + std::log(sum);
        const uint16_t* b = base.row(c, p - first);
        float scale, min_lp;
        std::memcpy(&scale, b, 4);
        std::memcpy(&min_lp, b + 2, 4);
        b += 4;
        double kl = 0, best = -1e30;
        int top_base = 0;
        for (int v = 0; v < V; ++v) {
          const double lb = double(scale) * b[v] + min_lp;
          if (lb > best) best = lb, top_base = v;
          if (lb > -16.0) kl += std::exp(lb) * (lb - (double(x[v]) - lse));
        }
        const int32_t next = win[static_cast<size_t>(p) + 1];
        nll += lse - x[next];
        nll_base -= double(scale) * b[next] + min_lp;
        kl_sum += kl;
        klds.push_back(kl);
        agree += top == top_base;
      }
    }
    if (progress) progress(c, base.n_chunk, kl_sum / static_cast<double>(klds.size()));
  }
  r.scored = static_cast<int64_t>(klds.size());
  r.kld_mean = kl_sum / static_cast<double>(r.scored);
  std::sort(klds.begin(), klds.end());
  auto rank = [&](double q) {
    const auto i = static_cast<size_t>(std::ceil(q * static_cast<double>(klds.size())));
    return klds[std::min(klds.size() - 1, i > 0 ? i - 1 : 0)];
  };
  r.kld_p99 = rank(0.99);
  r.kld_median = rank(0.5);
  r.kld_max = klds.back();
  r.top1_agree = static_cast<double>(agree) / static_cast<double>(r.scored);
  r.ppl_quant = std::exp(nll / static_cast<double>(r.scored));
  r.ppl_ref = std::exp(nll_base / static_cast<double>(r.scored));
  r.seconds = now_seconds() - t0;
  return r;
}

}  // namespace strata
