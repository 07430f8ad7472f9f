// Routed experts on the Vulkan device (Model::place_experts, memory/experts/device_experts.h): a
// MoE model on Vulkan0 with its experts split between the GPU and the host (--n-cpu-moe, a byte
// budget filled hottest first) gives the logits of the same model with every expert on the host,
// for a prompt in one batch and then token by token (max |Δlogit| within 1e-4 of the row's spread
// for f32 weights, 1e-2 for quantized ones: the device's K-reduction order differs from the
// host's), and the per-tier counters see both tiers. A synth qwen3moe always (4 layers of 8
// experts); with STRATA_FIXTURES, tiny-qwen3moe-f32 and tiny-gpt-oss-MXFP4_MOE (expert biases).
// The miss policy (memory/experts/miss_policy.h): a tiered run (a budget below the experts) gives
// the logits of the run with every expert in VRAM under --miss-policy cpu, copy and auto (copy:
// every expert runs on the device, so bit for bit), and its counters say where the misses ran
// (the synth model; the two fixtures with STRATA_FIXTURES).
// Without Vulkan the tests skip (fail under CI=true).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "common/fixtures.h"
#include "memory/experts/device_experts.h"
#include "model/hparams.h"
#include "model/model.h"
#include "model/synth.h"
#if STRATA_HAVE_VULKAN
#include "kernels/vulkan/vk_device.h"
#endif

namespace strata {
namespace {

#if STRATA_HAVE_VULKAN

// Logits of a prompt (all rows), then of n_gen more tokens one by one (the given ids).
std::vector<float> logits_of(Model& m, const std::vector<int32_t>& prompt, const std::vector<int32_t>& gen) {
  const int V = m.n_vocab();
  auto s = m.new_session({.n_ctx = 64, .n_batch = 32, .kv = {KvType::f16, KvType::f16, true, true}});
  EXPECT_TRUE(s.ok()) << s.message();
  if (!s.ok()) return {};
  std::vector<float> out((prompt.size() + gen.size()) * static_cast<size_t>(V));
  auto st = (*s)->eval(prompt, out.data(), true);
  EXPECT_TRUE(st.ok()) << st.message();
  for (size_t i = 0; i < gen.size(); ++i) {
    st = (*s)->eval(std::span<const int32_t>(&gen[i], 1), out.data() + (prompt.size() + i) * V, false);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  return out;
}

// max over rows of max |a − b| / the row's spread in a.
double worst_rel(const std::vector<float>& a, const std::vector<float>& b, int V) {
  double worst = 0.0;
  for (size_t r = 0; r < a.size() / static_cast<size_t>(V); ++r) {
    const float* x = a.data() + r * V;
    const float* y = b.data() + r * V;
    const auto [lo, hi] = std::minmax_element(x, x + V);
    double d = 0.0;
    for (int i = 0; i < V; ++i) d = std::max(d, std::fabs(double(x[i]) - y[i]));
    worst = std::max(worst, d / std::max(1e-6, double(*hi - *lo)));
  }
  return worst;
}

// The synth qwen3moe of these tests (4 layers of 8 experts, top-2, f32) at a temporary path named
// from stem; empty (and a failure) when it cannot be written.
std::string write_synth(const std::string& stem) {
  SynthSpec s;
  s.arch = "qwen3moe";
  s.n_layer = 4;
  s.n_embd = 64;
  s.n_expert = 8;
  s.n_expert_used = 2;
  s.expert_ffn = 64;
  s.n_vocab = 300;
  s.type = "f32";
  s.n_threads = 1;
  const std::string path =
      (std::filesystem::temp_directory_path() / (stem + std::to_string(::getpid()) + ".gguf")).string();
  auto r = synth_write(s, path);
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? path : std::string();
}

void split_matches_host(const std::string& path, double tol) {
  auto opened = VulkanDevice::open("Vulkan0");
  if (!opened.ok()) {
    if (testing::running_in_ci()) FAIL() << "no Vulkan device under CI: " << opened.message();
    GTEST_SKIP() << "no Vulkan device: " << opened.message();
  }
  VulkanDevice& dev = **opened;
  LoadOptions lo;
  lo.n_threads = 2;
  lo.device = &dev;
  auto host = Model::load(path, lo);  // dense weights and KV on the GPU, every expert on the host
  ASSERT_TRUE(host.ok()) << host.message();
  const int V = (*host)->n_vocab(), L = (*host)->hparams().n_layer;
  std::vector<int32_t> prompt(10), gen(4);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 37 + 5) % V);
  for (size_t i = 0; i < gen.size(); ++i) gen[i] = static_cast<int32_t>((i * 11 + 3) % V);
  const std::vector<float> want = logits_of(**host, prompt, gen);

  // Half the layers' experts on the GPU (--n-cpu-moe L/2), then a budget of about a third of them.
  for (int variant = 0; variant < 2; ++variant) {
    auto m = Model::load(path, lo);
    ASSERT_TRUE(m.ok()) << m.message();
    DeviceExpertOptions o;
    if (variant == 0) {
      o.n_cpu_moe = L / 2;
    } else {
      auto all = choose_device_experts((*m)->file(), L, (*m)->hparams().n_expert, {});
      ASSERT_TRUE(all.ok()) << all.message();
      o.budgeted = true;
      o.budget_bytes = all->bytes / 3;
    }
    const uint64_t before = dev.memory().allocated;
    ASSERT_TRUE((*m)->place_experts(o).ok());
    const DeviceExperts* de = (*m)->device_experts();
    ASSERT_NE(de, nullptr);
    EXPECT_GT(de->plan().n_placed, 0);
    EXPECT_LT(de->plan().n_placed, de->plan().n_total);
    EXPECT_EQ(dev.memory().allocated - before, de->plan().bytes);  // the plan's bytes are the allocation
    const std::vector<float> got = logits_of(**m, prompt, gen);
    const double rel = worst_rel(want, got, V);
    const DeviceExpertTotals t = de->totals();
    EXPECT_GT(t.gpu_slots, 0u);
    EXPECT_GT(t.host_slots, 0u);
    EXPECT_LE(rel, tol) << path << " variant " << variant;
    std::printf("%s: %s; per token %.2f experts on %s, %.2f on the host; max |dlogit| / spread %.2e\n",
                path.c_str(), de->plan().summary(dev.name()).c_str(), t.gpu_per_token(), dev.name().c_str(),
                t.host_per_token(), rel);
  }
}

TEST(VulkanExperts, SplitSynthQwen3MoeMatchesAllHost) {
  const std::string path = write_synth("strata_vk_experts_");
  ASSERT_FALSE(path.empty());
  split_matches_host(path, 1e-4);
  std::filesystem::remove(path);
}

// A tiered run (a third of the experts' bytes) under --miss-policy cpu, copy and auto against every
// expert in VRAM: within tol (copy: every expert on the device, bit for bit), and the counters;
// with bad_budget, copy under a budget without room for one miss slot is an error naming both.
// Fixtures: a shorter prompt (6 tokens, 2 decoded) keeps a test under a second on lavapipe.
void miss_policies_match_all_resident(const std::string& path, double tol, bool bad_budget) {
  auto opened = VulkanDevice::open("Vulkan0");
  if (!opened.ok()) {
    if (testing::running_in_ci()) FAIL() << "no Vulkan device under CI: " << opened.message();
    GTEST_SKIP() << "no Vulkan device: " << opened.message();
  }
  VulkanDevice& dev = **opened;
  LoadOptions lo;
  lo.n_threads = 2;
  lo.device = &dev;
  std::vector<float> want;
  uint64_t all_bytes = 0;
  int V = 0, n_used = 0, n_total = 0;
  std::vector<int32_t> prompt(bad_budget ? 10 : 6), gen(bad_budget ? 4 : 2);
  {
    auto m = Model::load(path, lo);
    ASSERT_TRUE(m.ok()) << m.message();
    V = (*m)->n_vocab();
    n_used = (*m)->hparams().n_expert_used;
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 37 + 5) % V);
    for (size_t i = 0; i < gen.size(); ++i) gen[i] = static_cast<int32_t>((i * 11 + 3) % V);
    DeviceExpertOptions o;
    o.miss = MissPolicy::miss_copy;  // nothing misses: no slot is reserved
    o.miss_slots = default_miss_slots(o.miss, n_used);
    ASSERT_TRUE((*m)->place_experts(o).ok());
    const DeviceExpertPlan& plan = (*m)->device_experts()->plan();
    ASSERT_EQ(plan.n_placed, plan.n_total);
    EXPECT_EQ(plan.miss_slots, 0);
    all_bytes = plan.bytes;
    n_total = plan.n_total;
    want = logits_of(**m, prompt, gen);
  }
  for (MissPolicy p : {MissPolicy::miss_cpu, MissPolicy::miss_copy, MissPolicy::miss_auto}) {
    auto m = Model::load(path, lo);
    ASSERT_TRUE(m.ok()) << m.message();
    DeviceExpertOptions o;
    o.budgeted = true;
    o.budget_bytes = all_bytes / 3;
    o.miss = p;
    o.miss_slots = default_miss_slots(p, n_used);
    const uint64_t before = dev.memory().allocated;
    ASSERT_TRUE((*m)->place_experts(o).ok()) << miss_policy_name(p);
    const DeviceExperts* de = (*m)->device_experts();
    const DeviceExpertPlan& plan = de->plan();
    EXPECT_LT(plan.n_placed, n_total);
    EXPECT_EQ(plan.miss_slots, p == MissPolicy::miss_cpu ? 0 : 2 * n_used);
    EXPECT_LE(plan.bytes + plan.slots_bytes(), o.budget_bytes);  // the slots come out of the budget
    EXPECT_EQ(dev.memory().allocated - before, plan.bytes + plan.slots_bytes());
    const std::vector<float> got = logits_of(**m, prompt, gen);
    const double rel = worst_rel(want, got, V);
    const DeviceExpertTotals t = de->totals();
    EXPECT_GT(t.miss.host_experts + t.miss.copy_experts, 0u);
    if (p == MissPolicy::miss_cpu) {
      EXPECT_EQ(t.miss.copy_experts, 0u);
      EXPECT_GT(t.host_slots, 0u);
    } else if (p == MissPolicy::miss_copy) {
      EXPECT_EQ(t.miss.host_experts, 0u);
      EXPECT_EQ(t.host_slots, 0u);  // every routed expert ran on the device
      EXPECT_GT(t.miss.copies, 0u);
      EXPECT_EQ(t.miss.copy_bytes, t.miss.copies * plan.miss_slot_bytes);
      EXPECT_LE(t.miss.copies - t.miss.prefetches + t.miss.slot_hits, t.miss.copy_experts);
      EXPECT_GE(t.miss.copies + t.miss.slot_hits, t.miss.copy_experts);
      EXPECT_GT(t.miss.prefetches, 0u);  // the decoded tokens' look-ahead
      EXPECT_EQ(rel, 0.0) << "every expert on the device: the resident run's bits";
    } else {
      EXPECT_EQ(t.miss.copies + t.miss.slot_hits, t.miss.copy_experts);
    }
    EXPECT_LE(rel, tol) << miss_policy_name(p);
    const std::vector<MissStats> layers = de->miss_layers();
    ASSERT_EQ(layers.size(), static_cast<size_t>((*m)->hparams().n_layer));
    MissStats sum;
    for (const MissStats& l : layers) sum += l;
    EXPECT_EQ(sum.host_experts, t.miss.host_experts);
    EXPECT_EQ(sum.copies, t.miss.copies);
    std::printf(
        "%s --miss-policy %s: %s; %s; %llu missed experts on the host, %llu copied (%llu uploads, "
        "%llu hits); max |dlogit| / spread %.2e\n",
        path.substr(path.find_last_of('/') + 1).c_str(), miss_policy_name(p),
        plan.summary(dev.name()).c_str(), de->miss_summary().c_str(), (unsigned long long)t.miss.host_experts,
        (unsigned long long)t.miss.copy_experts, (unsigned long long)t.miss.copies,
        (unsigned long long)t.miss.slot_hits, rel);
  }
  if (!bad_budget) return;
  auto m = Model::load(path, lo);
  ASSERT_TRUE(m.ok()) << m.message();
  DeviceExpertOptions o;
  o.budgeted = true;
  o.budget_bytes = 1000;
  o.miss = MissPolicy::miss_copy;
  o.miss_slots = 4;
  const Status st = (*m)->place_experts(o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--miss-policy copy"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("miss slot"), std::string::npos) << st.message();
}

TEST(VulkanExperts, MissPoliciesMatchAllResident) {
  const std::string path = write_synth("strata_vk_miss_");
  ASSERT_FALSE(path.empty());
  miss_policies_match_all_resident(path, 1e-4, true);
  std::filesystem::remove(path);
}

class VulkanExpertsFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(VulkanExpertsFixture, SplitMatchesAllHost) {
  STRATA_REQUIRE_FIXTURES(dir);
  const std::string name = GetParam();
  split_matches_host(dir + "/models/" + name, name.find("f32") != std::string::npos ? 1e-4 : 1e-2);
}

TEST_P(VulkanExpertsFixture, MissPoliciesMatchAllResident) {
  STRATA_REQUIRE_FIXTURES(dir);
  const std::string name = GetParam();
  miss_policies_match_all_resident(dir + "/models/" + name,
                                   name.find("f32") != std::string::npos ? 1e-4 : 1e-2, false);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, VulkanExpertsFixture,
                         ::testing::Values("tiny-qwen3moe-f32.gguf", "tiny-gpt-oss-MXFP4_MOE.gguf"),
                         [](const auto& info) {
                           std::string s = info.param;
                           s = s.substr(5, s.size() - 10);
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

#endif  // STRATA_HAVE_VULKAN

}  // namespace
}  // namespace strata
