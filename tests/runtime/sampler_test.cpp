#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "runtime/sampler.h"

namespace strata {
namespace {

std::vector<float> random_logits(int n, uint32_t seed, float scale = 3.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = nd(rng);
  return v;
}

std::set<int32_t> ids(const Candidates& c) {
  std::set<int32_t> s;
  for (auto& cd : c.data) s.insert(cd.id);
  return s;
}

TEST(Sampler, GreedyPicksArgmax) {
  for (uint32_t seed = 1; seed < 20; ++seed) {
    auto lg = random_logits(1000, seed);
    const int32_t want = static_cast<int32_t>(std::max_element(lg.begin(), lg.end()) - lg.begin());
    SamplerParams p;
    p.temp = 0.0f;
    Sampler s(p, 1000);
    EXPECT_EQ(s.sample(lg.data()), want);
    EXPECT_EQ(sample_greedy(lg.data(), 1000), want);
  }
}

TEST(Sampler, GreedyTieGoesToLowestId) {
  std::vector<float> lg = {0.f, 2.f, 1.f, 2.f};
  SamplerParams p;
  p.temp = 0;
  Sampler s(p, 4);
  EXPECT_EQ(s.sample(lg.data()), 1);
}

TEST(Sampler, TopK1EqualsGreedy) {
  for (uint32_t seed = 1; seed < 20; ++seed) {
    auto lg = random_logits(500, seed);
    SamplerParams p;
    p.temp = 1.5f;
    p.top_k = 1;
    p.seed = seed;
    Sampler s(p, 500);
    EXPECT_EQ(s.sample(lg.data()), sample_greedy(lg.data(), 500));
  }
}

TEST(Sampler, TopKKeepsTheKLargest) {
  auto lg = random_logits(200, 7);
  Candidates c;
  candidates_from_logits(lg.data(), 200, &c);
  sample_top_k(&c, 10);
  ASSERT_EQ(c.data.size(), 10u);
  std::vector<float> sorted = lg;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  for (auto& cd : c.data) EXPECT_GE(cd.logit, sorted[9]);
  EXPECT_TRUE(c.sorted);
  for (size_t i = 1; i < c.data.size(); ++i) EXPECT_GE(c.data[i - 1].logit, c.data[i].logit);
}

TEST(Sampler, TopPCutsSmallestSetReachingP) {
  // probabilities 0.5, 0.25, 0.125, 0.125 (logits = log p)
  std::vector<float> lg = {std::log(0.125f), std::log(0.5f), std::log(0.125f), std::log(0.25f)};
  Candidates c;
  candidates_from_logits(lg.data(), 4, &c);
  sample_top_p(&c, 0.7f, 1);
  EXPECT_EQ(ids(c), (std::set<int32_t>{1, 3}));
  candidates_from_logits(lg.data(), 4, &c);
  sample_top_p(&c, 0.5f, 1);  // 0.5 alone reaches it
  EXPECT_EQ(ids(c), (std::set<int32_t>{1}));
  candidates_from_logits(lg.data(), 4, &c);
  sample_top_p(&c, 0.5f, 3);  // min_keep wins
  EXPECT_EQ(c.data.size(), 3u);
  candidates_from_logits(lg.data(), 4, &c);
  sample_top_p(&c, 1.0f, 1);  // off
  EXPECT_EQ(c.data.size(), 4u);
}

TEST(Sampler, MinPKeepsTokensAboveFractionOfMax) {
  // p = 0.4, 0.3, 0.2, 0.1; min_p 0.5 keeps p >= 0.2
  std::vector<float> lg = {std::log(0.1f), std::log(0.4f), std::log(0.2f), std::log(0.3f)};
  Candidates c;
  candidates_from_logits(lg.data(), 4, &c);
  sample_min_p(&c, 0.5f, 1);
  EXPECT_EQ(ids(c), (std::set<int32_t>{1, 2, 3}));
  candidates_from_logits(lg.data(), 4, &c);
  sample_min_p(&c, 0.9f, 1);
  EXPECT_EQ(ids(c), (std::set<int32_t>{1}));
  candidates_from_logits(lg.data(), 4, &c);
  sample_min_p(&c, 0.0f, 1);
  EXPECT_EQ(c.data.size(), 4u);
}

TEST(Sampler, RepetitionPenaltyLlamaSemantics) {
  std::vector<float> lg = {2.0f, -2.0f, 1.0f};
  Candidates c;
  candidates_from_logits(lg.data(), 3, &c);
  sample_penalties(&c, {{0, 1}, {1, 3}}, 2.0f);
  EXPECT_FLOAT_EQ(c.data[0].logit, 1.0f);   // positive: divided
  EXPECT_FLOAT_EQ(c.data[1].logit, -4.0f);  // negative: multiplied
  EXPECT_FLOAT_EQ(c.data[2].logit, 1.0f);   // not in history
}

TEST(Sampler, RepetitionPenaltyWindow) {
  // Token 0 is best by a little; a strong penalty on recent tokens moves greedy to token 1,
  // and once token 0 leaves the last-n window it wins again.
  std::vector<float> lg = {1.0f, 0.9f, 0.1f};
  SamplerParams p;
  p.temp = 0;
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 2;
  Sampler s(p, 3);
  EXPECT_EQ(s.sample(lg.data()), 0);
  s.accept(0);
  EXPECT_EQ(s.sample(lg.data()), 1);
  s.accept(2);
  s.accept(2);  // token 0 has left the window of 2
  EXPECT_EQ(s.sample(lg.data()), 0);
}

TEST(Sampler, SameSeedSameTokens) {
  auto lg = random_logits(300, 3, 1.0f);
  SamplerParams p;
  p.temp = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 1234;
  Sampler a(p, 300), b(p, 300);
  p.seed = 4321;
  Sampler c(p, 300);
  int diff = 0;
  for (int i = 0; i < 200; ++i) {
    const int32_t ta = a.sample(lg.data()), tb = b.sample(lg.data()), tc = c.sample(lg.data());
    EXPECT_EQ(ta, tb);
    diff += ta != tc;
  }
  EXPECT_GT(diff, 100);  // a different seed gives a different stream
  a.reset();
  Sampler d(SamplerParams{a.params()}, 300);
  EXPECT_EQ(a.sample(lg.data()), d.sample(lg.data()));
}

TEST(Sampler, DistributionMatchesSoftmax) {
  // 8 tokens, temperature 2: chi-square of 40000 draws against softmax(logits / 2).
  std::vector<float> lg = {0.0f, 1.0f, 2.0f, -1.0f, 0.5f, 1.5f, -0.5f, 3.0f};
  const float temp = 2.0f;
  std::vector<double> want(lg.size());
  double z = 0;
  for (size_t i = 0; i < lg.size(); ++i) z += want[i] = std::exp(lg[i] / temp);
  for (auto& w : want) w /= z;

  SamplerParams p;
  p.temp = temp;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 42;
  Sampler s(p, static_cast<int32_t>(lg.size()));
  const int n = 40000;
  std::vector<int> count(lg.size());
  for (int i = 0; i < n; ++i) count[static_cast<size_t>(s.sample(lg.data()))]++;
  double chi2 = 0;
  for (size_t i = 0; i < lg.size(); ++i) {
    const double e = n * want[i];
    chi2 += (count[i] - e) * (count[i] - e) / e;
  }
  // 7 degrees of freedom: P(chi2 > 24.3) = 0.001
  EXPECT_LT(chi2, 24.3) << "sampled frequencies do not follow softmax(logits/T)";
}

TEST(Sampler, FilteredChainNeverEmitsCutTokens) {
  auto lg = random_logits(1000, 11);
  SamplerParams p;
  p.temp = 1.0f;
  p.top_k = 5;
  p.seed = 9;
  Sampler s(p, 1000);
  std::vector<float> sorted = lg;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  for (int i = 0; i < 500; ++i) {
    const int32_t t = s.sample(lg.data());
    EXPECT_GE(lg[static_cast<size_t>(t)], sorted[4]);
  }
}

TEST(Sampler, TemperatureZeroKeepsOnlyBest) {
  std::vector<float> lg = {0.3f, 0.1f, 0.9f};
  Candidates c;
  candidates_from_logits(lg.data(), 3, &c);
  sample_temperature(&c, 0.0f);
  ASSERT_EQ(c.data.size(), 1u);
  EXPECT_EQ(c.data[0].id, 2);
}

TEST(Sampler, ValidateNamesBadParameter) {
  SamplerParams p;
  p.top_p = 0.0f;
  auto st = sampler_params_validate(p);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("top-p"), std::string::npos);
  p = {};
  p.repeat_penalty = -1;
  EXPECT_FALSE(sampler_params_validate(p).ok());
  p = {};
  p.min_p = 2;
  EXPECT_FALSE(sampler_params_validate(p).ok());
  EXPECT_TRUE(sampler_params_validate(SamplerParams{}).ok());
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

TEST(Sampler, TopPOnLargeVocabMatchesFullSort) {
  // > 1024 candidates takes the partial-sort path; compare with a brute-force reference.
  for (float scale : {0.5f, 3.0f, 8.0f}) {
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, scale);
    std::vector<float> lg(50000);
    for (auto& x : lg) x = nd(rng);
    for (float p : {0.5f, 0.9f, 0.99f}) {
      Candidates c;
      candidates_from_logits(lg.data(), 50000, &c);
      sample_top_p(&c, p, 1);
      // reference: sort all by logit, keep the smallest prefix with mass >= p
      std::vector<int> idx(lg.size());
      for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int>(i);
      std::sort(idx.begin(), idx.end(),
                [&](int a, int b) { return lg[a] > lg[b] || (lg[a] == lg[b] && a < b); });
      double z = 0;
      const float mx = lg[static_cast<size_t>(idx[0])];
      for (float x : lg) z += std::exp(x - mx);
      double cum = 0;
      size_t n = 0;
      while (n < idx.size()) {
        cum += std::exp(lg[static_cast<size_t>(idx[n])] - mx) / z;
        ++n;
        if (cum >= p) break;
      }
      EXPECT_NEAR(static_cast<double>(c.data.size()), static_cast<double>(n),
                  1.0 + 0.01 * n)  // f32 running sum, as llama.cpp
          << "scale " << scale << " p " << p;
      EXPECT_EQ(c.data[0].id, idx[0]);
    }
  }
}

}  // namespace
}  // namespace strata
