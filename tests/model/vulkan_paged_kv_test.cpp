// Paged KV on the Vulkan device (kv/kv_pool.h in a Vulkan0 buffer; the attention shaders read
// and write K / V through each sequence's block table): the bundled model with f16 K / V rows in
// pool blocks handed out interleaved with a decoy sequence's (so a sequence's blocks are neither
// contiguous nor in order) gives the same bits as its contiguous rows on the device, and logits
// within the device's bound of the CPU's (max |Δ| within 1e-3 of each row's spread, the same top-1
// wherever the CPU's leads by more than twice that row's |Δ|; tests/model/vulkan_model_test.cpp), in one
// batch and in chunks; q8_0 rows (Hadamard-rotated) and q4_0 rows on a synth dense llama with heads
// of 32 (whole blocks) within 1e-2 of the CPU's, and bf16, iq4_nl, fp8_e4m3 and mxfp4 rows there
// (the quantized ones rotated) paged within 1e-2 of the CPU's. A session that
// adopts a cached prefix on the device (a prefix-cache hit) gets the bits of the session that
// computed it (a miss). Without Vulkan the tests skip (fail under CI=true).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <unistd.h>

#include "common/fixtures.h"
#include "kv/block_pool.h"
#include "kv/kv_pool.h"
#include "model/arch.h"
#include "model/model.h"
#include "model/synth.h"
#if STRATA_HAVE_VULKAN
#include "kernels/vulkan/vk_device.h"
#endif

namespace strata {
namespace {

#if STRATA_HAVE_VULKAN

const std::string& bundled() {
  static const std::string p = testing::source_dir() + "/tests/data/bundled_smoke.gguf";
  return p;
}

bool synth_written = false;

// A dense llama with heads of 32 (whole q8_0 / q4_0 blocks; the bundled model's are 16), F16
// weights, written once per process.
const std::string& llama_heads_32() {
  static const std::string p = [] {
    SynthSpec s;
    s.arch = "llama";
    s.n_layer = 2;
    s.n_embd = 64;
    s.n_head = 2;
    s.n_head_kv = 1;
    s.ffn = 128;
    s.n_vocab = 300;
    s.type = "f16";
    s.n_threads = 1;
    const std::string path =
        (std::filesystem::temp_directory_path() / ("strata_vk_paged_" + std::to_string(::getpid()) + ".gguf"))
            .string();
    auto r = synth_write(s, path);
    EXPECT_TRUE(r.ok()) << r.message();
    synth_written = true;
    return path;
  }();
  return p;
}

std::vector<int32_t> prompt_for(const Model& m, int n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>((i * 37 + 5) % m.n_vocab());
  return t;
}

// Every row's logits of `tokens` in chunks; pool: a paged session (a decoy sequence takes a block
// before each reservation, so the session's blocks interleave with it).
std::vector<float> eval_rows(const Model& m, const std::vector<int32_t>& tokens, int chunk, KvPool* pool,
                             const KvTypes& kv) {
  const int V = m.n_vocab(), n = static_cast<int>(tokens.size());
  std::vector<float> out(static_cast<size_t>(n) * V);
  auto s = m.new_session({.n_ctx = 160, .n_batch = chunk, .kv = kv, .kv_pool = pool});
  EXPECT_TRUE(s.ok()) << s.message();
  if (!s.ok()) return out;
  BlockTable decoy = pool ? pool->new_table(1024) : BlockTable();
  for (int i = 0; i < n; i += chunk) {
    const int k = std::min(chunk, n - i);
    if (pool) {
      EXPECT_TRUE(pool->reserve(decoy, decoy.rows() + 1).ok());
      const Status r = pool->reserve(*(*s)->kv_blocks(), i + k);
      EXPECT_TRUE(r.ok()) << r.message();
    }
    const Status st =
        (*s)->eval(std::span<const int32_t>(tokens.data() + i, k), out.data() + size_t(i) * V, true);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  if (pool) pool->release(decoy);
  return out;
}

// Per row max |Δ| within tol of the CPU row's spread, and the same top-1 where the CPU's leads by
// more than 2|Δ|; returns the worst |Δ| / spread.
double expect_close(const std::vector<float>& want, const std::vector<float>& got, int V, double tol,
                    const char* what) {
  double worst = 0.0;
  for (size_t r = 0; r < want.size() / size_t(V); ++r) {
    const float* w = want.data() + r * V;
    const float* g = got.data() + r * V;
    const auto [lo, hi] = std::minmax_element(w, w + V);
    const double spread = std::max(1e-6, double(*hi - *lo));
    double d = 0.0;
    for (int i = 0; i < V; ++i) d = std::max(d, std::fabs(double(g[i]) - w[i]));
    worst = std::max(worst, d / spread);
    EXPECT_LE(d, tol * spread) << what << " row " << r;
    const int top = static_cast<int>(std::max_element(w, w + V) - w);
    double second = -1e30;
    for (int i = 0; i < V; ++i)
      if (i != top) second = std::max(second, double(w[i]));
    EXPECT_TRUE(top == static_cast<int>(std::max_element(g, g + V) - g) || w[top] - second <= 2 * d)
        << what << " row " << r << ": top-1 differs";
  }
  return worst;
}

class VulkanPagedKv : public ::testing::Test {
 protected:
  void SetUp() override {
    static Result<std::unique_ptr<VulkanDevice>> opened = VulkanDevice::open("Vulkan0");
    if (!opened.ok()) {
      if (testing::running_in_ci()) FAIL() << "no Vulkan device under CI: " << opened.message();
      GTEST_SKIP() << "no Vulkan device: " << opened.message();
    }
    dev_ = opened->get();
  }
  static void TearDownTestSuite() {
    if (synth_written) std::filesystem::remove(llama_heads_32());
  }
  VulkanDevice* dev_ = nullptr;
};

// Paged rows of one KV type on the device against its contiguous rows (the same bits) and the CPU.
void paged_against_contiguous_and_cpu(VulkanDevice& dev, const std::string& path, const KvTypes& kv,
                                      double tol) {
  auto cpu = Model::load(path, {.n_threads = 2});
  ASSERT_TRUE(cpu.ok()) << cpu.message();
  LoadOptions lo;
  lo.n_threads = 2;
  lo.device = &dev;
  auto gpu = Model::load(path, lo);
  ASSERT_TRUE(gpu.ok()) << gpu.message();
  auto spec = (*gpu)->arch().kv_spec_for(kv);
  ASSERT_TRUE(spec.ok()) << spec.message();
  auto pool = KvPool::create(*spec, (*gpu)->device(),
                             {.budget_bytes = 4 << 20, .block_size = 4, .rotate = kv.rotate});
  ASSERT_TRUE(pool.ok()) << pool.message();
  const auto tokens = prompt_for(**gpu, 41);
  const int n = static_cast<int>(tokens.size()), V = (*gpu)->n_vocab();
  double worst = 0.0;
  for (int chunk : {n, 7, 1}) {
    const auto contiguous = eval_rows(**gpu, tokens, chunk, nullptr, kv);
    const auto paged = eval_rows(**gpu, tokens, chunk, pool->get(), kv);
    EXPECT_EQ(std::memcmp(contiguous.data(), paged.data(), sizeof(float) * paged.size()), 0)
        << "paged rows on " << dev.name() << " changed the logits (chunk " << chunk << ")";
    const auto want = eval_rows(**cpu, tokens, chunk, nullptr, kv);
    worst = std::max(worst, expect_close(want, paged, V, tol, "paged on the device vs the CPU"));
  }
  EXPECT_EQ((*pool)->stats().blocks.used, 0);
  std::printf("%s: paged %s / %s KV on %s: max |dlogit| / spread vs the CPU %.2e\n", path.c_str(),
              kv_type_name(kv.k), kv_type_name(kv.v), dev.name().c_str(), worst);
}

TEST_F(VulkanPagedKv, F16RowsMatchContiguousRowsAndTheCpu) {
  paged_against_contiguous_and_cpu(*dev_, bundled(), KvTypes{KvType::f16, KvType::f16, true, false}, 1e-3);
}

// q8_0 as llama.cpp stores it by default (Hadamard-rotated), q4_0 not rotated.
TEST_F(VulkanPagedKv, RotatedQ8_0RowsMatchContiguousRowsAndTheCpu) {
  paged_against_contiguous_and_cpu(*dev_, llama_heads_32(), KvTypes{KvType::q8_0, KvType::q8_0, true, false},
                                   1e-2);
}

TEST_F(VulkanPagedKv, Q4_0RowsMatchContiguousRowsAndTheCpu) {
  paged_against_contiguous_and_cpu(*dev_, llama_heads_32(), KvTypes{KvType::q4_0, KvType::q4_0, false, false},
                                   1e-2);
}

// The other KV types (bf16; iq4_nl, fp8_e4m3 and mxfp4 rotated, as quantized rows are by
// default): paged rows on the device against the CPU's rows, a short prompt in chunks of 6 (the
// kernel tests hold each type's rows to the CPU's bytes and its paged addressing; this runs
// them through a model), one model load for all four.
TEST_F(VulkanPagedKv, OtherKvTypesMatchTheCpu) {
  auto cpu = Model::load(llama_heads_32(), {.n_threads = 2});
  ASSERT_TRUE(cpu.ok()) << cpu.message();
  LoadOptions lo;
  lo.n_threads = 2;
  lo.device = dev_;
  auto gpu = Model::load(llama_heads_32(), lo);
  ASSERT_TRUE(gpu.ok()) << gpu.message();
  const auto tokens = prompt_for(**gpu, 17);
  for (KvType t : {KvType::bf16, KvType::iq4_nl, KvType::fp8_e4m3, KvType::mxfp4}) {
    const KvTypes kv{t, t, true, false};
    auto spec = (*gpu)->arch().kv_spec_for(kv);
    ASSERT_TRUE(spec.ok()) << spec.message();
    auto pool = KvPool::create(*spec, (*gpu)->device(), {.budget_bytes = 1 << 20, .block_size = 4});
    ASSERT_TRUE(pool.ok()) << pool.message();
    const auto paged = eval_rows(**gpu, tokens, 6, pool->get(), kv);
    const auto want = eval_rows(**cpu, tokens, 6, nullptr, kv);
    const double worst = expect_close(want, paged, (*gpu)->n_vocab(), 1e-2, kv_type_name(t));
    std::printf("paged %s KV on %s: max |dlogit| / spread vs the CPU %.2e\n", kv_type_name(t),
                dev_->name().c_str(), worst);
  }
}

// A prefix-cache hit on the device: the rows after the adopted prefix keep the bits of the
// session that computed the whole prompt (the miss).
TEST_F(VulkanPagedKv, PrefixHitMatchesAMiss) {
  LoadOptions lo;
  lo.n_threads = 2;
  lo.device = dev_;
  auto gpu = Model::load(bundled(), lo);
  ASSERT_TRUE(gpu.ok()) << gpu.message();
  const KvTypes kv{KvType::f16, KvType::f16, true, false};
  auto spec = (*gpu)->arch().kv_spec_for(kv);
  ASSERT_TRUE(spec.ok()) << spec.message();
  auto pool = KvPool::create(*spec, (*gpu)->device(), {.budget_bytes = 4 << 20, .block_size = 16});
  ASSERT_TRUE(pool.ok()) << pool.message();
  KvPool& kp = **pool;
  ASSERT_TRUE(kp.prefix_cache());
  const auto tokens = prompt_for(**gpu, 45);
  const int V = (*gpu)->n_vocab(), n = static_cast<int>(tokens.size());
  auto a = (*gpu)->new_session({.n_ctx = 160, .n_batch = 64, .kv = kv, .kv_pool = &kp});
  ASSERT_TRUE(a.ok()) << a.message();
  std::vector<float> miss(static_cast<size_t>(n) * V);
  ASSERT_TRUE(kp.reserve(*(*a)->kv_blocks(), n).ok());
  ASSERT_TRUE((*a)->eval(tokens, miss.data(), true).ok());
  kp.commit(*(*a)->kv_blocks(), tokens);
  auto b = (*gpu)->new_session({.n_ctx = 160, .n_batch = 64, .kv = kv, .kv_pool = &kp});
  ASSERT_TRUE(b.ok()) << b.message();
  const int64_t reused = kp.adopt_prefix(*(*b)->kv_blocks(), tokens);
  ASSERT_EQ(reused, 32);
  ASSERT_TRUE((*b)->assume_prefix(static_cast<int>(reused)).ok());
  ASSERT_TRUE(kp.reserve(*(*b)->kv_blocks(), n).ok());
  std::vector<float> hit(static_cast<size_t>(n - reused) * V);
  ASSERT_TRUE(
      (*b)->eval(std::span<const int32_t>(tokens).subspan(static_cast<size_t>(reused)), hit.data(), true)
          .ok());
  EXPECT_EQ(std::memcmp(miss.data() + reused * V, hit.data(), sizeof(float) * hit.size()), 0)
      << "rows after a prefix adopted on " << dev_->name() << " differ from the miss";
  EXPECT_EQ(kp.stats().blocks.shared, 2);
}

#endif  // STRATA_HAVE_VULKAN

}  // namespace
}  // namespace strata
