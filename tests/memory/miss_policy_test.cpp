// The GPU tier's miss policy (memory/experts/miss_policy.h) on injected rates: one token rarely
// pays for a copy, a batch amortises it; an expert already in a slot costs no upload; unmeasured
// rates keep auto on the host; cpu and copy are forced whatever the costs; a layer's copies are
// capped at its slots, the largest saving first; --miss-policy parses auto / cpu / copy and names
// the flag and the allowed values otherwise; the measured rate is an exponential average.
#include <gtest/gtest.h>

#include "memory/experts/miss_policy.h"

namespace strata {
namespace {

MissCosts costs(double pcie, double cpu, double gpu) {
  return MissCosts{pcie, MissRateTable::flat(cpu), MissRateTable::flat(gpu), 0.0};
}

// A 24 GB/s bus, a host at 100 GB/s of expert weights, a GPU at 2 TB/s; 16 MB experts.
const MissCosts kPcie = costs(24e9, 100e9, 2000e9);
constexpr uint64_t kExpert = 16u << 20;

TEST(MissPolicy, OneTokenStaysOnTheHostABatchIsCopied) {
  const MissDecision one = decide_miss(MissPolicy::miss_auto, kPcie, kExpert, 1, false);
  EXPECT_TRUE(one.measured);
  EXPECT_EQ(one.choice, MissChoice::miss_host);
  EXPECT_DOUBLE_EQ(one.host_s, double(kExpert) / 100e9);
  EXPECT_DOUBLE_EQ(one.copy_s, double(kExpert) / 24e9 + double(kExpert) / 2000e9);
  // Break-even: t · b / cpu = b / pcie + t · b / gpu → t = (1/24e9) / (1/100e9 − 1/2000e9) ≈ 4.4.
  EXPECT_EQ(decide_miss(MissPolicy::miss_auto, kPcie, kExpert, 4, false).choice, MissChoice::miss_host);
  const MissDecision five = decide_miss(MissPolicy::miss_auto, kPcie, kExpert, 5, false);
  EXPECT_EQ(five.choice, MissChoice::miss_copy);
  EXPECT_LT(five.copy_s, five.host_s);
  EXPECT_EQ(decide_miss(MissPolicy::miss_auto, kPcie, kExpert, 512, false).choice, MissChoice::miss_copy);
}

TEST(MissPolicy, AnExpertInASlotPaysNoUpload) {
  const MissDecision d = decide_miss(MissPolicy::miss_auto, kPcie, kExpert, 1, true);
  EXPECT_EQ(d.choice, MissChoice::miss_copy);
  EXPECT_DOUBLE_EQ(d.copy_s, double(kExpert) / 2000e9);
}

TEST(MissPolicy, ActivationsOverTheBusCount) {
  MissCosts c = kPcie;
  c.act_bytes_per_token = 2.0 * 4096 * 4;
  const MissDecision d = decide_miss(MissPolicy::miss_auto, c, kExpert, 3, true);
  EXPECT_DOUBLE_EQ(d.copy_s, 3 * c.act_bytes_per_token / 24e9 + 3 * double(kExpert) / 2000e9);
}

TEST(MissPolicy, ASlowDeviceNeverWins) {
  // lavapipe-like: the "GPU" runs on the host's cores, slower than the host's own kernels.
  const MissCosts c = costs(8e9, 20e9, 5e9);
  for (int64_t t : {1, 8, 64, 4096})
    EXPECT_EQ(decide_miss(MissPolicy::miss_auto, c, kExpert, t, false).choice, MissChoice::miss_host) << t;
  EXPECT_EQ(decide_miss(MissPolicy::miss_auto, c, kExpert, 64, true).choice, MissChoice::miss_host);
}

TEST(MissPolicy, UnmeasuredRatesStayOnTheHost) {
  for (MissCosts c : {costs(0, 100e9, 2000e9), costs(24e9, 0, 2000e9), costs(24e9, 100e9, 0)}) {
    const MissDecision d = decide_miss(MissPolicy::miss_auto, c, kExpert, 1000, false);
    EXPECT_FALSE(d.measured);
    EXPECT_EQ(d.choice, MissChoice::miss_host);
  }
  EXPECT_EQ(decide_miss(MissPolicy::miss_auto, kPcie, kExpert, 0, true).choice, MissChoice::miss_host);
}

TEST(MissPolicy, CpuAndCopyAreForced) {
  EXPECT_EQ(decide_miss(MissPolicy::miss_cpu, kPcie, kExpert, 4096, true).choice, MissChoice::miss_host);
  EXPECT_EQ(decide_miss(MissPolicy::miss_copy, kPcie, kExpert, 1, false).choice, MissChoice::miss_copy);
  EXPECT_EQ(decide_miss(MissPolicy::miss_copy, MissCosts{}, kExpert, 1, false).choice, MissChoice::miss_copy);
  // The estimates are reported whatever the policy.
  const MissDecision d = decide_miss(MissPolicy::miss_cpu, kPcie, kExpert, 2, false);
  EXPECT_DOUBLE_EQ(d.host_s, 2.0 * double(kExpert) / 100e9);
}

TEST(MissPolicy, ALayersCopiesAreCappedAtItsSlotsLargestSavingFirst) {
  const std::vector<MissCandidate> m = {
      {kExpert, 1, false},   // host
      {kExpert, 8, false},   // copy, saving ≈ 8·0.168 − 0.77 ms
      {kExpert, 64, false},  // the largest saving
      {kExpert, 2, true},    // in a slot: copy, small saving
      {kExpert, 16, false},  // copy
  };
  auto d = decide_layer_misses(MissPolicy::miss_auto, kPcie, m, 2);
  ASSERT_EQ(d.size(), m.size());
  EXPECT_EQ(d[0].choice, MissChoice::miss_host);
  EXPECT_EQ(d[1].choice, MissChoice::miss_host);  // over the two slots
  EXPECT_EQ(d[2].choice, MissChoice::miss_copy);
  EXPECT_EQ(d[3].choice, MissChoice::miss_host);
  EXPECT_EQ(d[4].choice, MissChoice::miss_copy);
  d = decide_layer_misses(MissPolicy::miss_auto, kPcie, m, 8);
  int copies = 0;
  for (const MissDecision& x : d) copies += x.choice == MissChoice::miss_copy;
  EXPECT_EQ(copies, 4);
  d = decide_layer_misses(MissPolicy::miss_copy, kPcie, m, 1);  // copy: all, the caller takes turns
  for (const MissDecision& x : d) EXPECT_EQ(x.choice, MissChoice::miss_copy);
  d = decide_layer_misses(MissPolicy::miss_auto, kPcie, m, 0);
  for (const MissDecision& x : d) EXPECT_EQ(x.choice, MissChoice::miss_host);
}

TEST(MissPolicy, RatesByTokensPerExpert) {
  EXPECT_EQ(miss_bucket(0), 0);
  EXPECT_EQ(miss_bucket(1), 0);
  EXPECT_EQ(miss_bucket(2), 1);
  EXPECT_EQ(miss_bucket(3), 1);
  EXPECT_EQ(miss_bucket(4), 2);
  EXPECT_EQ(miss_bucket(127), 6);
  EXPECT_EQ(miss_bucket(128), kMissBuckets - 1);
  EXPECT_EQ(miss_bucket(100000), kMissBuckets - 1);
  MissRateTable t;
  EXPECT_EQ(t.at(5), 0.0);
  t.bytes_per_s[1] = 10.0;  // 2-3 tokens
  t.bytes_per_s[5] = 50.0;  // 32-63
  EXPECT_EQ(t.at(1), 10.0);
  EXPECT_EQ(t.at(3), 10.0);
  EXPECT_EQ(t.at(8), 10.0);  // bucket 3: 1 and 5 are two away, the lower wins
  EXPECT_EQ(t.at(16), 50.0);
  EXPECT_EQ(t.at(4096), 50.0);
  EXPECT_EQ(t.best(), 50.0);
  // A device whose batch rate is far above its one-token rate (its latency amortised): one token
  // stays on the host, 32 go over the bus.
  MissCosts c = costs(24e9, 100e9, 0.0);
  c.gpu.bytes_per_s[0] = 50e9;
  c.gpu.bytes_per_s[5] = 3000e9;
  EXPECT_EQ(decide_miss(MissPolicy::miss_auto, c, kExpert, 1, true).choice, MissChoice::miss_host);
  const MissDecision d = decide_miss(MissPolicy::miss_auto, c, kExpert, 32, false);
  EXPECT_EQ(d.choice, MissChoice::miss_copy);
  EXPECT_DOUBLE_EQ(d.copy_s, double(kExpert) / 24e9 + 32.0 * double(kExpert) / 3000e9);
}

TEST(MissPolicy, ParsesTheFlag) {
  EXPECT_EQ(parse_miss_policy("auto").value(), MissPolicy::miss_auto);
  EXPECT_EQ(parse_miss_policy("cpu").value(), MissPolicy::miss_cpu);
  EXPECT_EQ(parse_miss_policy("copy").value(), MissPolicy::miss_copy);
  auto bad = parse_miss_policy("foo");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("--miss-policy"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("'foo'"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("auto, cpu or copy"), std::string::npos) << bad.message();
  EXPECT_FALSE(parse_miss_policy("").ok());
  EXPECT_FALSE(parse_miss_policy("CPU ").ok());
}

TEST(MissPolicy, RateIsAnExponentialAverage) {
  MissRate r(0.5);
  EXPECT_EQ(r.bytes_per_s(), 0.0);
  r.add(100.0, 0.0);  // no time: ignored
  r.add(0.0, 1.0);
  EXPECT_EQ(r.samples(), 0u);
  r.add(100.0, 1.0);
  EXPECT_DOUBLE_EQ(r.bytes_per_s(), 100.0);
  r.add(300.0, 1.0);
  EXPECT_DOUBLE_EQ(r.bytes_per_s(), 200.0);
  EXPECT_EQ(r.samples(), 2u);
  MissRates rs;
  rs.add(100.0, 100.0, 1.0);   // one token per expert: bucket 0
  rs.add(100.0, 3200.0, 2.0);  // 32 tokens per expert: bucket 5
  rs.add(0.0, 100.0, 1.0);     // no weights: ignored
  const MissRateTable t = rs.table();
  EXPECT_DOUBLE_EQ(t.bytes_per_s[0], 100.0);
  EXPECT_DOUBLE_EQ(t.bytes_per_s[5], 1600.0);
  EXPECT_EQ(t.bytes_per_s[1] + t.bytes_per_s[2] + t.bytes_per_s[3] + t.bytes_per_s[4] + t.bytes_per_s[6],
            0.0);
}

}  // namespace
}  // namespace strata
