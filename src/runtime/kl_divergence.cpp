#include "runtime/kl_divergence.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/clock.h"
#include "runtime/generate.h"
#include "runtime/kld_base.h"
#include "runtime/perplexity.h"

namespace strata {

void RoutingCapture::attach(LoadOptions* opts) {
  opts->expert_stats = true;
  opts->experts.on_route = [this](uint64_t token0, int layer, int64_t n, const int32_t* sel, int k) {
    record(token0, layer, n, sel, k);
  };
}

void RoutingCapture::begin_window(int n_ctx) {
  n_ctx_ = n_ctx;
  have_base_ = false;
  for (auto& s : sel_) std::fill(s.begin(), s.end(), -1);
}

void RoutingCapture::record(uint64_t token0, int layer, int64_t n, const int32_t* sel, int k) {
  if (!have_base_) {  // the window's first step starts at its position 0
    base_ = token0;
    have_base_ = true;
  }
  if (layer < 0 || k <= 0) return;
  if (k_ != k) {
    k_ = k;
    sel_.clear();
  }
  if (static_cast<size_t>(layer) >= sel_.size()) sel_.resize(static_cast<size_t>(layer) + 1);
  std::vector<int32_t>& s = sel_[static_cast<size_t>(layer)];
  s.resize(static_cast<size_t>(n_ctx_) * static_cast<size_t>(k), -1);
  for (int64_t t = 0; t < n; ++t) {
    const uint64_t p = token0 - base_ + static_cast<uint64_t>(t);
    if (p >= static_cast<uint64_t>(n_ctx_)) continue;
    std::copy(sel + t * k, sel + (t + 1) * k,
              s.begin() + static_cast<ptrdiff_t>(p * static_cast<uint64_t>(k)));
  }
}

std::span<const int32_t> RoutingCapture::chosen(int layer, int p) const {
  if (layer < 0 || static_cast<size_t>(layer) >= sel_.size() || p < 0 || p >= n_ctx_) return {};
  const std::vector<int32_t>& s = sel_[static_cast<size_t>(layer)];
  if (s.empty() || s[static_cast<size_t>(p) * k_] < 0) return {};
  return {s.data() + static_cast<size_t>(p) * k_, static_cast<size_t>(k_)};
}

namespace {

// log Σ exp(x) of one row in double (max-subtracted); NaN / inf on non-finite logits.
double log_sum_exp(const float* x, int n) {
  double mx = x[0];
  for (int v = 1; v < n; ++v) mx = std::max(mx, double(x[v]));
  double sum = 0;
  for (int v = 0; v < n; ++v) sum += std::exp(double(x[v]) - mx);
  return mx + std::log(sum);
}

bool all_finite(const float* x, int n) {
  return std::all_of(x, x + n, [](float v) { return std::isfinite(v); });
}

int argmax(const float* x, int n) {
  return static_cast<int>(std::max_element(x, x + n) - x);
}

double nearest_rank(const std::vector<double>& sorted, double q) {
  const size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, i > 0 ? i - 1 : 0)];
}

// The per-position numbers both comparisons gather, and the result they give.
struct KldTally {
  std::vector<double> klds;
  double kl_sum = 0, nll_q = 0, nll_r = 0;
  int64_t agree = 0;
  void add(double kl, bool same_top, double nll_quant, double nll_ref) {
    klds.push_back(kl);
    kl_sum += kl;
    agree += same_top;
    nll_q += nll_quant;
    nll_r += nll_ref;
  }
  double mean() const { return kl_sum / double(klds.size()); }
  void into(KldResult* r) {
    r->scored = static_cast<int64_t>(klds.size());
    r->kld_mean = mean();
    r->top1_agree = double(agree) / double(r->scored);
    r->ppl_quant = std::exp(nll_q / double(r->scored));
    r->ppl_ref = std::exp(nll_r / double(r->scored));
    std::sort(klds.begin(), klds.end());
    r->kld_max = klds.back();
    r->kld_p99 = nearest_rank(klds, 0.99);
    r->kld_median = nearest_rank(klds, 0.5);
  }
};

}  // namespace

Result<KldResult> kl_divergence(const Model& quant, const Model& ref, std::span<const int32_t> tokens,
                                const KldOptions& opts, RoutingCapture* cq, RoutingCapture* cr,
                                const KldProgress& progress) {
  if ((cq == nullptr) != (cr == nullptr)) return err("kld: routing capture for one model only");
  const int V = ref.n_vocab();
  if (quant.n_vocab() != V)
    return err("kld: the models have different vocabularies (%d vs reference %d)", quant.n_vocab(), V);
  PerplexityOptions po;
  po.n_ctx = opts.n_ctx;
  const int ctx = perplexity_ctx(ref, po);
  const int first = opts.second_half ? ctx / 2 : 0;
  if (ctx < 2 || first > ctx - 2) return err("kld: window %d is too small to score a position", ctx);
  if (opts.n_batch < 1) return err("kld: batch %d must be >= 1", opts.n_batch);
  const int64_t n_win = static_cast<int64_t>(tokens.size()) / ctx;
  if (n_win == 0)
    return err(
        "kld: text has %zu tokens, fewer than one window of %d (use a longer text or a smaller window)",
        tokens.size(), ctx);
  for (size_t i = 0; i < static_cast<size_t>(n_win * ctx); ++i) {
    if (tokens[i] < 0 || tokens[i] >= V)
      return err("kld: token id %d at %zu is outside the vocabulary (%d)", tokens[i], i, V);
  }
  constexpr size_t kMaxLogitsBytes = size_t{128} << 20;
  SessionOptions so;
  so.n_ctx = ctx;
  so.n_batch =
      std::min({opts.n_batch, ctx,
                static_cast<int>(std::max<size_t>(1, kMaxLogitsBytes / sizeof(float) / std::max(V, 1)))});
  STRATA_ASSIGN(auto sr, ref.new_session(so));
  so.kv = opts.kv;
  STRATA_ASSIGN(auto sq, quant.new_session(so));
  sq->set_knobs(opts.knobs);

  const int n_scored = ctx - 1 - first;  // positions first .. ctx-2
  // The reference's logits of the scored positions and their log Σ exp: log P_ref is recomputed
  // from them in double, so a model against itself gives exactly 0.
  std::vector<float> ref_logits(static_cast<size_t>(n_scored) * V);
  std::vector<double> ref_lse(static_cast<size_t>(n_scored));
  std::vector<int> ref_top(static_cast<size_t>(n_scored));
  KldTally tally;
  tally.klds.reserve(static_cast<size_t>(n_win * n_scored));
  std::vector<double> ref_nll(static_cast<size_t>(n_scored));
  std::vector<double> route_sum;
  std::vector<int64_t> route_n;
  KldResult r;
  r.n_ctx = ctx;
  r.windows = static_cast<int>(n_win);
  const double t0 = now_seconds();
  for (int64_t w = 0; w < n_win; ++w) {
    const std::span<const int32_t> win =
        tokens.subspan(static_cast<size_t>(w * ctx), static_cast<size_t>(ctx));
    std::string problem;
    auto rows_of = [&](const char* which, auto&& per_row) {
      return [&, which](int64_t s, std::span<const float> rows) {
        const int64_t n = static_cast<int64_t>(rows.size()) / V;
        for (int64_t j = 0; j < n; ++j) {
          const int64_t p = s + j;
          if (p < first || p > ctx - 2) continue;
          const float* row = rows.data() + static_cast<size_t>(j) * V;
          const double lse = log_sum_exp(row, V);
          if (!std::isfinite(lse) || !all_finite(row, V)) {
            problem = err("non-finite logits of the %s model at position %lld of window %lld", which,
                          static_cast<long long>(p), static_cast<long long>(w))
                          .message;
            return false;
          }
          per_row(static_cast<int>(p - first), row, lse, win[static_cast<size_t>(p + 1)]);
        }
        return true;
      };
    };
    if (cr) cr->begin_window(ctx);
    if (cq) cq->begin_window(ctx);
    Status st = score(ref, *sr, V, win, so.n_batch,
                      rows_of("reference", [&](int i, const float* row, double lse, int32_t tgt) {
                        std::copy(row, row + V, ref_logits.begin() + static_cast<ptrdiff_t>(i) * V);
                        ref_lse[static_cast<size_t>(i)] = lse;
                        ref_top[static_cast<size_t>(i)] = argmax(row, V);
                        ref_nll[static_cast<size_t>(i)] = lse - double(row[tgt]);
                      }));
    if (!problem.empty()) return err("kld: %s", problem.c_str());
    if (!st.ok())
      return err("kld: reference, window %lld: %s", static_cast<long long>(w), st.message().c_str());
    st = score(quant, *sq, V, win, so.n_batch,
               rows_of("quantized", [&](int i, const float* row, double lse, int32_t tgt) {
                 const float* lr = ref_logits.data() + static_cast<size_t>(i) * V;
                 const double lse_r = ref_lse[static_cast<size_t>(i)];
                 double kl = 0;
                 for (int v = 0; v < V; ++v) {
                   const double a = double(lr[v]) - lse_r, b = double(row[v]) - lse;
                   kl += std::exp(a) * (a - b);
                 }
                 kl = std::max(kl, 0.0);  // rounding can leave a tiny negative sum
                 tally.add(kl, argmax(row, V) == ref_top[static_cast<size_t>(i)], lse - double(row[tgt]),
                           ref_nll[static_cast<size_t>(i)]);
               }));
    if (!problem.empty()) return err("kld: %s", problem.c_str());
    if (!st.ok())
      return err("kld: quantized, window %lld: %s", static_cast<long long>(w), st.message().c_str());
    if (cq) {
      const int L = std::max(cq->n_layers(), cr->n_layers());
      route_sum.resize(static_cast<size_t>(L), 0.0);
      route_n.resize(static_cast<size_t>(L), 0);
      for (int l = 0; l < L; ++l) {
        for (int p = first; p <= ctx - 2; ++p) {
          const auto a = cq->chosen(l, p), b = cr->chosen(l, p);
          if (a.empty() || b.empty() || a.size() != b.size()) continue;
          int common = 0;
          for (int32_t e : a) common += std::find(b.begin(), b.end(), e) != b.end();
          route_sum[static_cast<size_t>(l)] += double(common) / double(a.size());
          route_n[static_cast<size_t>(l)]++;
        }
      }
    }
    if (progress) progress(static_cast<int>(w), r.windows, tally.mean());
  }
  r.seconds = now_seconds() - t0;
  tally.into(&r);
  for (size_t l = 0; l < route_sum.size(); ++l)
    r.routing.push_back(route_n[l] ? route_sum[l] / double(route_n[l]) : -1.0);
  return r;
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
  KldTally tally;
  KldResult r;
  r.n_ctx = ctx;
  r.windows = base.n_chunk;
  const double t0 = now_seconds();
  for (int c = 0; c < base.n_chunk; ++c) {
    std::vector<int32_t> win(base.tokens.begin() + static_cast<ptrdiff_t>(c) * ctx,
                             base.tokens.begin() + static_cast<ptrdiff_t>(c + 1) * ctx);
    if (bos >= 0) win[0] = bos;  // as llama-perplexity evaluates a chunk
    std::string problem;
    const Status st = score(m, *s, V, win, so.n_batch, [&](int64_t s0, std::span<const float> rows) {
      const int64_t n = static_cast<int64_t>(rows.size()) / V;
      for (int64_t j = 0; j < n; ++j) {
        const int64_t p = s0 + j;
        if (p < first || p > ctx - 2) continue;
        const float* x = rows.data() + static_cast<size_t>(j) * V;
        const double lse = log_sum_exp(x, V);
        if (!std::isfinite(lse) || !all_finite(x, V)) {
          problem = "non-finite logits at position " + std::to_string(p) + " of chunk " + std::to_string(c);
          return false;
        }
        // The base's row: log P(v) = min_log_prob + scale * q; KL over entries above e^-16 (llama.cpp's).
        const uint16_t* b = base.row(c, static_cast<int>(p - first));
        float scale, min_lp;
        std::memcpy(&scale, b, sizeof scale);
        std::memcpy(&min_lp, b + 2, sizeof min_lp);
        b += 4;
        double kl = 0;
        const int top_base = static_cast<int>(std::max_element(b, b + V) - b);
        for (int v = 0; v < V; ++v) {
          const double lb = double(scale) * b[v] + min_lp;
          if (lb > -16.0) kl += std::exp(lb) * (lb - (double(x[v]) - lse));
        }
        const int32_t next = win[static_cast<size_t>(p) + 1];
        tally.add(kl, argmax(x, V) == top_base, lse - double(x[next]), -(double(scale) * b[next] + min_lp));
      }
      return true;
    });
    if (!problem.empty()) return err("kld: %s", problem.c_str());
    if (!st.ok()) return err("kld: chunk %d: %s", c, st.message().c_str());
    if (progress) progress(c, base.n_chunk, tally.mean());
  }
  r.seconds = now_seconds() - t0;
  tally.into(&r);
  return r;
}

Result<KldResult> kl_divergence_of_files(const std::string& quant_path, const std::string& ref_path,
                                         std::string_view text, const KldOptions& opts, int n_threads,
                                         const KldProgress& progress) {
  RoutingCapture cq, cr;
  LoadOptions lq, lr;
  lq.n_threads = lr.n_threads = n_threads;
  cq.attach(&lq);
  cr.attach(&lr);
  STRATA_ASSIGN(auto ref, Model::load(ref_path, lr));
  STRATA_ASSIGN(auto quant, Model::load(quant_path, lq));
  if (!ref->has_tokenizer()) return err("kld: %s has no tokenizer", ref_path.c_str());
  const std::vector<int32_t> ids =
      ref->tokenizer().encode(text, /*add_special=*/false, /*parse_special=*/false);
  return kl_divergence(*quant, *ref, ids, opts, &cq, &cr, progress);  // dense models: no routing recorded
}

Status kld_gate(const KldResult& r, double kld_max_mean, double routing_min) {
  if (kld_max_mean >= 0 && !(r.kld_mean <= kld_max_mean))
    return err("gate failed: mean KLD %.6f > kld=%g", r.kld_mean, kld_max_mean);
  if (routing_min >= 0) {
    for (size_t l = 0; l < r.routing.size(); ++l) {
      if (r.routing[l] >= 0 && r.routing[l] < routing_min)
        return err("gate failed: routing consistency %.4f of layer %zu < routing=%g", r.routing[l], l,
                   routing_min);
    }
  }
  return {};
}

}  // namespace strata
