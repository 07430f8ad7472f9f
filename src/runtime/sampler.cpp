#include "runtime/sampler.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <limits>

namespace strata {

Status sampler_params_validate(const SamplerParams& p) {
  if (!std::isfinite(p.temp)) return err("--temp must be a finite number (got %g)", p.temp);
  if (!(p.top_p > 0.0f) || !std::isfinite(p.top_p)) return err("--top-p must be > 0 (got %g)", p.top_p);
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return err("--min-p must be in [0, 1] (got %g)", p.min_p);
  if (!(p.repeat_penalty > 0.0f) || !std::isfinite(p.repeat_penalty)) {
    return err("--repeat-penalty must be > 0 (got %g)", p.repeat_penalty);
  }
  if (p.repeat_last_n < 0) return err("--repeat-last-n must be >= 0 (got %d)", p.repeat_last_n);
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f))
    return err("presence_penalty must be in [-2, 2] (got %g)", p.presence_penalty);
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f))
    return err("frequency_penalty must be in [-2, 2] (got %g)", p.frequency_penalty);
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0) return err("logit_bias: token id %d is negative", id);
    if (!std::isfinite(bias)) return err("logit_bias: the bias of token %d is not a finite number", id);
  }
  return {};
}

// Descending by logit; equal logits by ascending id so results do not depend on sort internals.
static bool cand_greater(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

static void sort_prefix(Candidates* c, size_t k) {
  k = std::min(k, c->data.size());
  std::partial_sort(c->data.begin(), c->data.begin() + static_cast<std::ptrdiff_t>(k), c->data.end(),
                    cand_greater);
}

void candidates_from_logits(const float* logits, int32_t n_vocab, Candidates* c) {
  c->data.clear();  // no resize: a greedy draw leaves one candidate, and growing would zero the rest
  c->data.reserve(static_cast<size_t>(n_vocab));
  for (int32_t i = 0; i < n_vocab; ++i) c->data.push_back({i, logits[i], 0.0f});
  c->sorted = false;
}

void sample_penalties(Candidates* c, const std::unordered_map<int32_t, int>& counts, float penalty) {
  if (penalty == 1.0f || counts.empty()) return;
  for (auto& cd : c->data) {
    if (!counts.count(cd.id)) continue;
    // Dividing a negative logit would make it *more* likely; multiply instead (llama.cpp).
    cd.logit = cd.logit <= 0.0f ? cd.logit * penalty : cd.logit / penalty;
  }
  c->sorted = false;
}

void sample_presence_frequency(Candidates* c, const std::unordered_map<int32_t, int>& counts, float presence,
                               float frequency) {
  if ((presence == 0.0f && frequency == 0.0f) || counts.empty()) return;
  for (auto& cd : c->data) {
    auto it = counts.find(cd.id);
    if (it == counts.end()) continue;
    cd.logit -= presence + static_cast<float>(it->second) * frequency;
  }
  c->sorted = false;
}

void sample_logit_bias(Candidates* c, std::span<const std::pair<int32_t, float>> bias) {
  if (bias.empty()) return;
  STRATA_ASSERT(!c->sorted);
  for (const auto& [id, b] : bias) {
    STRATA_ASSERT(id >= 0 && static_cast<size_t>(id) < c->data.size() &&
                  c->data[static_cast<size_t>(id)].id == id);
    c->data[static_cast<size_t>(id)].logit += b;
  }
}

void sample_top_k(Candidates* c, int32_t k) {
  if (k <= 0 || c->data.empty()) return;
  const size_t kk = std::min(static_cast<size_t>(k), c->data.size());
  if (!c->sorted) sort_prefix(c, kk);
  c->data.resize(kk);
  c->sorted = true;
}

void sample_softmax(Candidates* c) {
  if (c->data.empty()) return;
  float max_l = -std::numeric_limits<float>::infinity();
  for (auto& cd : c->data) max_l = std::max(max_l, cd.logit);
  float sum = 0.0f;
  for (auto& cd : c->data) {
    cd.p = std::exp(cd.logit - max_l);
    sum += cd.p;
  }
  for (auto& cd : c->data) cd.p /= sum;
}

void sample_top_p(Candidates* c, float p, size_t min_keep) {
  if (p >= 1.0f || c->data.empty()) return;
  sample_softmax(c);
  if (!c->sorted) {
    // Large unsorted lists: the mass p is usually inside the top few hundred, so sort only those
    // unless they do not reach it.
    size_t k = c->data.size() > 1024 ? 256 : c->data.size();
    sort_prefix(c, k);
    if (k < c->data.size()) {
      float mass = 0.0f;
      for (size_t i = 0; i < k; ++i) mass += c->data[i].p;
      if (mass < p || k < min_keep) {
        k = c->data.size();
        sort_prefix(c, k);
      }
      c->data.resize(k);  // candidates beyond a prefix that reaches p are cut below anyway
    }
    c->sorted = true;
  }
  // Keep the smallest prefix whose probability mass reaches p (and at least min_keep).
  float cum = 0.0f;
  size_t last = c->data.size();
  for (size_t i = 0; i < c->data.size(); ++i) {
    cum += c->data[i].p;
    if (cum >= p && i + 1 >= min_keep) {
      last = i + 1;
      break;
    }
  }
  c->data.resize(last);
}

void sample_min_p(Candidates* c, float p, size_t min_keep) {
  if (p <= 0.0f || c->data.empty()) return;
  // p_i >= p * p_max  <=>  logit_i >= max_logit + log(p): no softmax needed.
  if (!c->sorted) {
    sort_prefix(c, c->data.size());
    c->sorted = true;
  }
  const float min_logit = c->data[0].logit + std::log(p);
  size_t i = 1;  // the top token always survives
  for (; i < c->data.size(); ++i) {
    if (c->data[i].logit < min_logit && i >= min_keep) break;
  }
  c->data.resize(i);
}

void sample_temperature(Candidates* c, float temp) {
  if (c->data.empty()) return;
  if (temp <= 0.0f) {
    // Keep only the best: same effect as llama.cpp setting every other logit to -inf.
    size_t best = 0;
    for (size_t i = 1; i < c->data.size(); ++i) {
      if (cand_greater(c->data[i], c->data[best])) best = i;
    }
    const Candidate keep = c->data[best];
    c->data.assign(1, keep);
    c->sorted = true;
    return;
  }
  for (auto& cd : c->data) cd.logit /= temp;
}

int32_t sample_dist(Candidates* c, std::mt19937* rng) {
  STRATA_ASSERT(!c->data.empty());
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  const double r = uni(*rng);  // always one draw, so the RNG stream does not depend on the list size
  if (c->data.size() == 1) {
    c->data[0].p = 1.0f;
    return c->data[0].id;
  }
  float max_l = -std::numeric_limits<float>::infinity();
  for (auto& cd : c->data) max_l = std::max(max_l, cd.logit);
  double sum = 0.0;
  for (auto& cd : c->data) {
    cd.p = std::exp(cd.logit - max_l);
    sum += cd.p;
  }
  const double target = sum * r;
  double run = 0.0;
  size_t chosen = c->data.size() - 1;
  for (size_t i = 0; i < c->data.size(); ++i) {
    run += c->data[i].p;
    if (run >= target) {
      chosen = i;
      break;
    }
  }
  for (auto& cd : c->data) cd.p = static_cast<float>(cd.p / sum);
  return c->data[chosen].id;
}

int32_t sample_greedy(const float* logits, int32_t n_vocab) {
  STRATA_ASSERT(n_vocab > 0);
  int32_t best = 0;
  for (int32_t i = 1; i < n_vocab; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return best;
}

static uint32_t resolve_seed(uint32_t seed) {
  if (seed != kSamplerRandomSeed) return seed;
  return static_cast<uint32_t>(std::chrono::system_clock::now().time_since_epoch().count());
}

Sampler::Sampler(const SamplerParams& params, int32_t n_vocab)
    : params_(params), n_vocab_(n_vocab), seed_(resolve_seed(params.seed)), rng_(seed_) {
  STRATA_ASSERT(n_vocab > 0);
  if (params_.min_keep == 0) params_.min_keep = 1;
}

void Sampler::prepare(const float* logits, std::span<const uint64_t> allowed) {
  if (!allowed.empty() && params_.logit_bias.empty()) {  // the allowed tokens only, in id order
    cands_.data.clear();
    const int32_t n_words = std::min((n_vocab_ + 63) / 64, static_cast<int32_t>(allowed.size()));
    for (int32_t w = 0; w < n_words; ++w)
      for (uint64_t m = allowed[static_cast<size_t>(w)]; m != 0; m &= m - 1) {
        const int32_t id = w * 64 + std::countr_zero(m);
        if (id < n_vocab_) cands_.data.push_back({id, logits[id], 0.0f});
      }
    cands_.sorted = false;
  } else {
    candidates_from_logits(logits, n_vocab_, &cands_);
    sample_logit_bias(&cands_, params_.logit_bias);  // indexed by id: before filtering
    if (!allowed.empty())
      std::erase_if(cands_.data, [&](const Candidate& cd) { return !mask_allows(allowed, cd.id); });
  }
  sample_penalties(&cands_, counts_, params_.repeat_penalty);
  sample_presence_frequency(&cands_, gen_counts_, params_.presence_penalty, params_.frequency_penalty);
}

int32_t Sampler::draw() {
  if (params_.temp <= 0.0f) {
    sample_temperature(&cands_, 0.0f);  // argmax of the penalised logits; no RNG draw
    return cands_.data[0].id;
  }
  sample_top_k(&cands_, params_.top_k);
  sample_top_p(&cands_, params_.top_p, params_.min_keep);
  sample_min_p(&cands_, params_.min_p, params_.min_keep);
  sample_temperature(&cands_, params_.temp);
  return sample_dist(&cands_, &rng_);
}

void Sampler::prepare_constrained(const float* logits) {
  if (const std::span<const uint64_t> bits = constraint_->mask_bits(); !bits.empty())
    return prepare(logits, bits);
  prepare(logits);
  constraint_->filter(&cands_);
}

int32_t Sampler::sample(const float* logits) {
  if (constraint_ && constraint_->mask_ready()) {
    prepare_constrained(logits);
    return cands_.data.empty() ? -1 : draw();
  }
  prepare(logits);
  if (!constraint_) return draw();
  if (params_.temp <= 0.0f) {  // greedy: the best allowed token, whichever way it is found
    size_t best = 0;           // the list stays whole for the tries below
    for (size_t i = 1; i < cands_.data.size(); ++i)
      if (cand_greater(cands_.data[i], cands_.data[best])) best = i;
    if (constraint_->allows(cands_.data[best].id)) {
      const Candidate keep = cands_.data[best];
      cands_.data.assign(1, keep);
      cands_.sorted = true;
      return keep.id;
    }
    // The state's mask (one walk of the vocabulary's trie, kept for the state) costs less than
    // sorting the best few of a large list; without one, the best few are tried one by one first.
    if (constraint_->mask_bits().empty()) {
      constexpr size_t kTry = 16;
      const size_t n = std::min(kTry, cands_.data.size());
      sort_prefix(&cands_, n);
      for (size_t i = 1; i < n; ++i)
        if (constraint_->allows(cands_.data[i].id)) return cands_.data[i].id;
    }
  } else if (const int32_t tok = draw(); constraint_->allows(tok)) {
    return tok;
  }
  prepare_constrained(logits);  // a rejected draw: again from the allowed tokens
  if (cands_.data.empty()) return -1;
  return draw();
}

void Sampler::accept(int32_t token) {
  if (constraint_) constraint_->accept(token);
  if (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) ++gen_counts_[token];
  remember(token);
}

void Sampler::remember(int32_t token) {
  if (params_.repeat_last_n <= 0) return;
  history_.push_back(token);
  ++counts_[token];
  while (history_.size() > static_cast<size_t>(params_.repeat_last_n)) {
    const int32_t old = history_.front();
    history_.pop_front();
    if (--counts_[old] == 0) counts_.erase(old);
  }
}

void Sampler::accept_prompt(std::span<const int32_t> tokens) {
  for (int32_t t : tokens) remember(t);
}

void Sampler::reset() {
  history_.clear();
  counts_.clear();
  gen_counts_.clear();
  rng_.seed(seed_);
}

}  // namespace strata
