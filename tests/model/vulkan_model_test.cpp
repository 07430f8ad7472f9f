// Models end to end on the Vulkan device (LoadOptions::device = Vulkan0: the standard decoders'
// dense weights and KV caches in its buffers, attention / dense FFN / output head by its
// shaders, routed experts on the host) against the same model on the CPU: a prompt in one batch,
// then greedy generation token by token (the decode path through the device's KV rows), every
// row's max |Δlogit| within a tolerance of the logits' spread and its top-1 the same wherever the
// CPU's top-1 leads the runner-up by more than twice that row's |Δ| (the bundled model: every row). The
// bundled model always (a few seconds on lavapipe); with STRATA_FIXTURES, the fixture architectures that run
// through the seam (f32 weights: 1e-4 of the spread, the bar; quantized ones: o and h are rounded on
// the device, 1e-2; deepseek4: its projections and attention core, window and compressed rows on the
// device). Without Vulkan the tests skip (fail under CI=true).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <vector>

#include <unistd.h>

#include "common/fixtures.h"
#include "format/gguf.h"
#include "memory/experts/device_experts.h"
#include "model/model.h"
#include "model/synth.h"
#include "quantize/ftype.h"
#include "quantize/quantize_gguf.h"
#if STRATA_HAVE_VULKAN
#include "kernels/vulkan/vk_device.h"
#endif

namespace strata {
namespace {

#if STRATA_HAVE_VULKAN

int argmax(const float* v, int n) {
  return static_cast<int>(std::max_element(v, v + n) - v);
}

// Prompt of n_prompt tokens in one batch, then n_gen greedy tokens on `gpu` one by one; the CPU
// model evaluates the same tokens. Reports max |Δ| / spread and top-1 agreement.
// *agreed: the rows whose top-1 agree.
// kv: both sessions' KV types (f16 asked for: the device stores f16 rows, no fallback).
// gpu_experts: every routed expert placed on the device too (Model::place_experts: run_experts).
void compare(const std::string& path, int n_prompt, int n_gen, double tol, int* agreed, KvTypes kv = {},
             bool gpu_experts = false) {
  auto opened = VulkanDevice::open("Vulkan0");
  if (!opened.ok()) {
    if (testing::running_in_ci()) FAIL() << "no Vulkan device under CI: " << opened.message();
    GTEST_SKIP() << "no Vulkan device: " << opened.message();
  }
  VulkanDevice& dev = **opened;
  auto cpu = Model::load(path, {.n_threads = 2});
  ASSERT_TRUE(cpu.ok()) << cpu.message();
  LoadOptions lo;
  lo.n_threads = 2;
  lo.device = &dev;
  auto gpu = Model::load(path, lo);
  ASSERT_TRUE(gpu.ok()) << gpu.message();
  EXPECT_GT(dev.memory().allocated, 0u);  // the dense weights
  if (gpu_experts) {
    auto placed = (*gpu)->place_experts(DeviceExpertOptions{});
    ASSERT_TRUE(placed.ok()) << placed.message();
    ASSERT_NE((*gpu)->device_experts(), nullptr);
    EXPECT_EQ((*gpu)->device_experts()->plan().n_placed, (*gpu)->device_experts()->plan().n_total);
  }
  const int V = (*cpu)->n_vocab();
  auto cs = (*cpu)->new_session({.n_ctx = 64, .n_batch = 32, .kv = kv});
  auto gs = (*gpu)->new_session({.n_ctx = 64, .n_batch = 32, .kv = kv});
  ASSERT_TRUE(cs.ok() && gs.ok()) << (cs.ok() ? gs.message() : cs.message());

  std::vector<int32_t> tokens(static_cast<size_t>(n_prompt));
  for (int i = 0; i < n_prompt; ++i) tokens[static_cast<size_t>(i)] = (i * 37 + 5) % V;
  std::vector<float> want(static_cast<size_t>(n_prompt) * V), got(want.size());
  ASSERT_TRUE((*cs)->eval(tokens, want.data(), true).ok());
  auto st = (*gs)->eval(tokens, got.data(), true);
  ASSERT_TRUE(st.ok()) << st.message();
  double worst = 0.0;
  int agree = 0, rows = 0;
  auto check_rows = [&](int n) {
    for (int r = 0; r < n; ++r) {
      const float* w = want.data() + size_t(r) * V;
      const float* g = got.data() + size_t(r) * V;
      const auto [lo_it, hi_it] = std::minmax_element(w, w + V);
      const double spread = std::max(1e-6, double(*hi_it - *lo_it));
      double d = 0.0;
      for (int i = 0; i < V; ++i) d = std::max(d, std::fabs(double(g[i]) - w[i]));
      worst = std::max(worst, d / spread);
      EXPECT_LE(d, tol * spread) << path << " row " << rows;
      // A difference of d can only swap tokens within 2d of each other: where the CPU's top-1
      // leads by more, the GPU's must be the same.
      const int top = argmax(w, V);
      double second = -1e30;
      for (int i = 0; i < V; ++i)
        if (i != top) second = std::max(second, double(w[i]));
      const bool same = top == argmax(g, V);
      EXPECT_TRUE(same || w[top] - second <= 2 * d) << path << " row " << rows << ": top-1 differs";
      agree += same;
      ++rows;
    }
  };
  check_rows(n_prompt);
  int32_t next = argmax(got.data() + size_t(n_prompt - 1) * V, V);
  for (int i = 0; i < n_gen; ++i) {  // greedy on the GPU; the CPU follows its tokens
    ASSERT_TRUE((*cs)->eval(std::span<const int32_t>(&next, 1), want.data(), true).ok());
    st = (*gs)->eval(std::span<const int32_t>(&next, 1), got.data(), true);
    ASSERT_TRUE(st.ok()) << st.message();
    check_rows(1);
    next = argmax(got.data(), V);
  }
  std::printf("%s on %s: max |dlogit| / spread %.2e, top-1 %d/%d\n", path.c_str(), dev.name().c_str(), worst,
              agree, rows);
  *agreed = agree;
}

TEST(VulkanModel, BundledModelGeneratesAsOnTheCpu) {
  int agreed = 0;
  compare(testing::source_dir() + "/tests/data/bundled_smoke.gguf", 12, 6, 1e-3, &agreed);
  if (!IsSkipped()) {
    EXPECT_EQ(agreed, 18);  // every row's top-1 the same
  }
}

// f16 K / V rows asked for (not a default that may fall back): the Vulkan attention writes and
// reads them; against the CPU's f16 rows.
TEST(VulkanModel, BundledModelWithF16KvGeneratesAsOnTheCpu) {
  int agreed = 0;
  compare(testing::source_dir() + "/tests/data/bundled_smoke.gguf", 12, 6, 1e-3, &agreed,
          KvTypes{KvType::f16, KvType::f16, true, false});
  if (!IsSkipped()) {
    EXPECT_EQ(agreed, 18);
  }
}

// A dense llama (every layer's FFN through run_ffn, F16 weights).
TEST(VulkanModel, DenseLlamaMatchesTheCpu) {
  SynthSpec s;
  s.arch = "llama";
  s.n_layer = 2;
  s.n_embd = 64;
  s.ffn = 128;
  s.n_vocab = 300;
  s.type = "f16";
  s.n_threads = 1;
  const std::string path =
      (std::filesystem::temp_directory_path() / ("strata_vk_dense_" + std::to_string(::getpid()) + ".gguf"))
          .string();
  auto r = synth_write(s, path);
  ASSERT_TRUE(r.ok()) << r.message();
  int agreed = 0;
  compare(path, 12, 4, 1e-3, &agreed);
  std::filesystem::remove(path);
}

// A 2-layer synth qwen3moe of `type` (`strata synth --type`), 4 experts of `width` top-2, with its
// dense weights and every routed expert on the device, against the CPU within the quantized
// models' 1e-2 of the spread.
void expect_synth_moe_matches(const char* type, int width) {
  SynthSpec s;
  s.arch = "qwen3moe";
  s.n_layer = 2;
  s.n_embd = width;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_expert = 4;
  s.n_expert_used = 2;
  s.expert_ffn = width;
  s.n_vocab = 300;
  s.type = type;
  s.n_threads = 1;
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("strata_vk_" + std::string(type) + "_" + std::to_string(::getpid()) + ".gguf"))
                               .string();
  auto r = synth_write(s, path);
  ASSERT_TRUE(r.ok()) << r.message();
  int agreed = 0;
  compare(path, 8, 3, 1e-2, &agreed, {}, /*gpu_experts=*/true);
  std::filesystem::remove(path);
}

// Q4_K_M (llama.cpp's mix as synth writes it: Q4_K matrices, Q6_K output and layer 1's attn_v /
// ffn_down; rows of 256): linear.comp's K-quant builds against Q8_K activations (plain and job
// lists), swiglu.comp's Q8_K h and o.
TEST(VulkanModel, Q4KMMoeMatchesTheCpu) {
  expect_synth_moe_matches("q4_k_m", 256);
}

// NVFP4 routed experts (the rest Q8_0): linear.comp's NVFP4 build (a 64-element block's four
// UE4M3-scaled sub-blocks against Q8_0 activations) in the experts' job lists.
TEST(VulkanModel, Nvfp4ExpertsMatchTheCpu) {
  expect_synth_moe_matches("nvfp4", 128);
}

// tiny-qwen3moe-f32 quantized to Q4_K_M as llama-quantize does it (`strata quantize`): its rows of
// 64 / 32 fall back to Q5_0 / Q5_1 / Q8_0 (Q4_K / Q5_K / Q6_K rows that are not a multiple of
// 256), so those linear.comp builds and the Q8_1 form run too; experts on the device as well.
TEST(VulkanModel, FixtureQuantizedToQ4KMMatchesTheCpu) {
  STRATA_REQUIRE_FIXTURES(dir);
  auto src = GgufFile::open(dir + "/models/tiny-qwen3moe-f32.gguf");
  ASSERT_TRUE(src.ok()) << src.message();
  QuantizeOptions o;
  o.policy.ftype = quant_ftype("Q4_K_M");
  ASSERT_NE(o.policy.ftype, nullptr);
  o.n_threads = 1;
  auto plan = plan_quantize(**src, o);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_GT(plan->n_fallback, 0);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("strata_vk_fx_q4km_" + std::to_string(::getpid()) + ".gguf"))
          .string();
  ASSERT_TRUE(write_quantized(**src, *plan, o, path).ok());
  int agreed = 0;
  compare(path, 8, 3, 1e-2, &agreed, {}, /*gpu_experts=*/true);
  std::filesystem::remove(path);
}

// --gpu-budget: dense weights over the budget are refused before any copy, a session's KV over
// what is left when it is made; both name the bytes and the budget. A GPU device given to an
// architecture that places nothing on it (deepseek_v41) is refused by name.
TEST(VulkanModel, BudgetsAndRefusalsNameTheProblem) {
  auto small = VulkanDevice::open("Vulkan0", 100 << 10);
  if (!small.ok()) GTEST_SKIP() << "no Vulkan device: " << small.message();
  const std::string bundled = testing::source_dir() + "/tests/data/bundled_smoke.gguf";
  LoadOptions lo;
  lo.n_threads = 1;
  lo.device = small->get();
  auto m = Model::load(bundled, lo);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("the dense weights need 560.2 KiB on Vulkan0, over its budget of 100.0 KiB"),
            std::string::npos)
      << m.message();
  EXPECT_EQ((*small)->memory().allocated, 0u);
  auto fits = VulkanDevice::open("Vulkan0", 700 << 10);
  ASSERT_TRUE(fits.ok()) << fits.message();
  lo.device = fits->get();
  auto m2 = Model::load(bundled, lo);
  ASSERT_TRUE(m2.ok()) << m2.message();
  auto sess = (*m2)->new_session({.n_ctx = 4096});
  ASSERT_FALSE(sess.ok());
  EXPECT_NE(sess.message().find("KV caches (context 4096) need 2.0 MiB on Vulkan0"), std::string::npos)
      << sess.message();
  EXPECT_TRUE((*m2)->new_session({.n_ctx = 64}).ok());
  if (auto v41 = testing::fixtures_v41_dir()) {  // deepseek_v41 places nothing on a device yet
    auto d = Model::load(*v41 + "/deep", lo);
    ASSERT_FALSE(d.ok());
    EXPECT_NE(d.message().find("does not run through the device seam yet"), std::string::npos) << d.message();
  }
}

class VulkanFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(VulkanFixture, MatchesTheCpu) {
  STRATA_REQUIRE_FIXTURES(dir);
  const std::string name = GetParam();
  int agreed = 0;
  compare(dir + "/models/" + name, 12, 4, name.find("f32") != std::string::npos ? 1e-4 : 1e-2, &agreed);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, VulkanFixture,
                         ::testing::Values("tiny-qwen3moe-f32.gguf", "tiny-gpt-oss-f32.gguf",
                                           "tiny-qwen2moe-f32.gguf", "tiny-llama-moe-Q8_0.gguf",
                                           "tiny-gpt-oss-MXFP4_MOE.gguf", "tiny-deepseek4-f32.gguf"),
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
