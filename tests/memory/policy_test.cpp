// Expert policies on hand-made access sequences whose correct victims can be stated.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "memory/experts/expert_policy.h"

namespace strata {
namespace {

constexpr ExpertKey A{0, 0}, B{0, 1}, C{1, 0}, D{1, 1};

std::unique_ptr<ExpertPolicy> make(const char* name, PolicyOptions o = {}) {
  if (o.n_layers == 0) o.n_layers = 2;
  if (o.n_experts == 0) o.n_experts = 4;
  auto p = make_expert_policy(name, o);
  EXPECT_TRUE(p.ok()) << p.message();
  return std::move(p).value();
}

// Requests k at tick t and inserts it on first sight (all fit in these small cases).
void use(ExpertPolicy& p, ExpertKey k, uint64_t t, std::vector<ExpertKey>* resident) {
  p.on_access(k, t);
  for (const ExpertKey& r : *resident)
    if (r == k) return;
  resident->push_back(k);
  p.on_insert(k, t);
}

TEST(Policy, FactoryErrors) {
  PolicyOptions o;
  o.n_layers = 2;
  o.n_experts = 4;
  auto bad = make_expert_policy("fifo", o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("unknown expert policy 'fifo'"), std::string::npos) << bad.message();
  auto st = make_expert_policy("static", o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("hot set"), std::string::npos) << st.message();
  o.static_hot = {{5, 0}};
  st = make_expert_policy("static", o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("layer 5"), std::string::npos) << st.message();
  PolicyOptions z;
  EXPECT_FALSE(make_expert_policy("lru", z).ok());
  o.static_hot.clear();
  o.decay_half_life = 0;
  EXPECT_FALSE(make_expert_policy("lfu", o).ok());
  o.decay_half_life = 10;
  o.rerank_interval = 0;
  EXPECT_FALSE(make_expert_policy("adaptive", o).ok());
  for (const char* n : {"lru", "lfu", "adaptive"}) {
    o.rerank_interval = 4;
    auto p = make_expert_policy(n, o);
    ASSERT_TRUE(p.ok()) << n;
    EXPECT_STREQ((*p)->name(), n);
  }
}

TEST(Policy, LruEvictsLeastRecent) {
  auto p = make("lru");
  std::vector<ExpertKey> res;
  use(*p, A, 0, &res);
  use(*p, B, 0, &res);  // same token, later layer order: B is more recent than A
  use(*p, C, 1, &res);
  use(*p, A, 2, &res);
  // recency: B (oldest), C, A
  EXPECT_EQ(res[p->choose_victim(res, 3)], B);
  const std::vector<ExpertKey> ac{A, C};
  EXPECT_EQ(ac[p->choose_victim(ac, 3)], C);
  EXPECT_GT(p->score(A, 3), p->score(C, 3));
  EXPECT_TRUE(p->admit(D, 3));
}

TEST(Policy, LfuEvictsLeastFrequentAndAges) {
  PolicyOptions o;
  o.decay_half_life = 100;
  auto p = make("lfu", o);
  std::vector<ExpertKey> res;
  for (int i = 0; i < 3; ++i) use(*p, A, i, &res);
  use(*p, B, 3, &res);
  for (int i = 0; i < 2; ++i) use(*p, C, 4 + i, &res);
  EXPECT_EQ(res[p->choose_victim(res, 6)], B);  // counts ~3, 1, 2
  // 1000 tokens later A's 3 requests have decayed by 2^-10; a fresh single request beats them.
  use(*p, D, 1000, &res);
  const std::vector<ExpertKey> ad{A, D};
  EXPECT_EQ(ad[p->choose_victim(ad, 1000)], A);
  // Counts survive eviction: A comes back with its (decayed) history plus the new request.
  p->on_evict(A);
  p->on_insert(A, 1001);
  p->on_access(A, 1001);
  EXPECT_NEAR(p->score(A, 1001), 1.0 + 3.0 * std::exp2(-1000.0 / 100), 0.01);
  EXPECT_NEAR(p->score(C, 6), 2.0, 0.05);
  const std::vector<ExpertKey> ca{C, A};
  EXPECT_EQ(ca[p->choose_victim(ca, 1001)], C);  // C: 2 * 2^-9.95 < 1
  // Ties go to the least recently requested.
  auto q = make("lfu", o);
  std::vector<ExpertKey> r2;
  use(*q, B, 0, &r2);
  use(*q, A, 0, &r2);
  EXPECT_EQ(r2[q->choose_victim(r2, 0)], B);
}

TEST(Policy, StaticKeepsItsHotSet) {
  PolicyOptions o;
  o.static_hot = {C, A};  // C hottest, then A
  auto p = make("static", o);
  EXPECT_TRUE(p->admit(C, 0));
  EXPECT_TRUE(p->admit(A, 0));
  EXPECT_FALSE(p->admit(B, 0));
  EXPECT_FALSE(p->admit(D, 0));
  std::vector<ExpertKey> res;
  use(*p, A, 0, &res);
  use(*p, B, 1, &res);  // a cold one that got a free slot
  use(*p, C, 2, &res);
  use(*p, D, 3, &res);
  // Cold residents go first, least recent first: B (then D); then hot ones by lowest priority.
  EXPECT_EQ(res[p->choose_victim(res, 4)], B);
  const std::vector<ExpertKey> acd{A, C, D};
  EXPECT_EQ(acd[p->choose_victim(acd, 4)], D);
  const std::vector<ExpertKey> ca{C, A};
  EXPECT_EQ(ca[p->choose_victim(ca, 4)], A);
  EXPECT_GT(p->score(C, 0), p->score(A, 0));
  EXPECT_EQ(p->score(B, 0), 0.0);
}

TEST(Policy, AdaptiveRerankGatesAdmission) {
  PolicyOptions o;
  o.decay_half_life = 1e9;  // no decay: plain counts
  o.rerank_interval = 10;
  auto p = make("adaptive", o);
  std::vector<ExpertKey> res;
  // Before the first re-rank everything is admitted.
  EXPECT_TRUE(p->admit(C, 0));
  for (int t = 0; t < 5; ++t) use(*p, A, t, &res);
  for (int t = 5; t < 8; ++t) use(*p, B, t, &res);
  p->on_access(C, 8);  // C was streamed, not inserted: 2 slots were ever resident
  EXPECT_EQ(res.size(), 2u);
  p->on_access(A, 10);  // tick 10: re-rank -> hot set {A, B}, threshold = B's count 3
  EXPECT_TRUE(p->admit(A, 10));
  EXPECT_TRUE(p->admit(B, 10));
  EXPECT_FALSE(p->admit(C, 10));  // 1 < 3
  EXPECT_FALSE(p->admit(D, 10));  // never seen
  p->on_access(C, 11);
  p->on_access(C, 12);
  EXPECT_TRUE(p->admit(C, 12));  // 3 >= 3: as hot as the coldest hot expert
  // Victim: lowest current count (B: 3, A: 6).
  EXPECT_EQ(res[p->choose_victim(res, 12)], B);
  // Counts survive eviction.
  p->on_evict(B);
  EXPECT_NEAR(p->score(B, 12), 3.0, 1e-6);
}

TEST(Policy, AdaptiveDecayLetsTheHotSetMove) {
  PolicyOptions o;
  o.decay_half_life = 20;
  o.rerank_interval = 50;
  auto p = make("adaptive", o);
  std::vector<ExpertKey> res;
  use(*p, A, 0, &res);  // one slot in this tiny cache
  for (int t = 1; t < 50; ++t) p->on_access(A, t);
  p->on_access(B, 50);  // re-rank: hot = {A}
  EXPECT_FALSE(p->admit(B, 50));
  // The workload moves to B: after a while B's count passes A's decayed one.
  for (int t = 51; t < 100; ++t) p->on_access(B, t);
  p->on_access(B, 100);  // re-rank
  EXPECT_TRUE(p->admit(B, 100));
  EXPECT_GT(p->score(B, 100), p->score(A, 100));
}

// A profile seeds lfu / adaptive: the seeds sum to the weight asked for, order the victims before
// any request, and adaptive ranks its (warm-started) hot set at the first request.
TEST(Policy, ProfileSeedsOrderVictimsAndTheFirstRerank) {
  EXPECT_TRUE(expert_profile_seed({0, 0, 0}, 64).empty());
  const std::vector<uint64_t> counts = {6, 0, 3, 1, 0, 0, 0, 2};  // A, B, ..., C = index 4, D = 5
  const std::vector<double> seed = expert_profile_seed(counts, 24);
  ASSERT_EQ(seed.size(), counts.size());
  double sum = 0;
  for (double v : seed) sum += v;
  EXPECT_NEAR(sum, 24.0, 1e-9);
  EXPECT_NEAR(seed[0], 12.0, 1e-9);
  PolicyOptions o;
  o.decay_half_life = 1e9;
  o.rerank_interval = 100;
  o.seed_counts = {5, 1, 0, 0, 4, 0, 0, 0};  // A 5, B 1, C 4, D 0
  auto lfu = make("lfu", o);
  const std::vector<ExpertKey> res = {A, B, C};
  EXPECT_EQ(res[lfu->choose_victim(res, 0)], B);
  auto ad = make("adaptive", o);
  for (ExpertKey k : {A, C}) ad->on_insert(k, 0);  // the store's warm start: 2 slots
  ad->on_access(B, 0);                             // first request: re-rank now, hot = {A, C}
  EXPECT_TRUE(ad->admit(A, 0));
  EXPECT_TRUE(ad->admit(C, 0));
  EXPECT_FALSE(ad->admit(B, 0)) << "2 < C's 4: streamed, the warm hot set stays";
  EXPECT_FALSE(ad->admit(D, 0));
  for (int t = 1; t < 4; ++t) ad->on_access(B, static_cast<uint64_t>(t));
  EXPECT_TRUE(ad->admit(B, 4)) << "this run's requests overtake the seed";
  // Wrong-size or negative seeds are errors.
  o.n_layers = 2;
  o.n_experts = 4;
  o.seed_counts = {1, 2};
  auto bad = make_expert_policy("adaptive", o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("seed counts"), std::string::npos) << bad.message();
  o.seed_counts.assign(8, 0.0);
  o.seed_counts[3] = -1;
  EXPECT_FALSE(make_expert_policy("lfu", o).ok());
}

}  // namespace
}  // namespace strata
