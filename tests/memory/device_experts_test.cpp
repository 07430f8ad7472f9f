// choose_device_experts (memory/experts/device_experts.h) on a synth qwen3moe (4 layers of 8
// experts): every expert without rules; --n-cpu-moe keeps the first layers on the host; -ot rules
// match tensor names, the first match wins and a layer one of whose tensors stays on the host keeps
// all its experts there; a budget takes the hottest experts (profile counts), ties to the later
// layers; the bytes are device_expert_bytes per placed expert; a bad regex or counts of the wrong
// size are errors naming the problem. DeviceExperts on a host-visible CPU device then hands out
// the placed experts with the device named and counts the routed slots per tier.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "kernels/cpu_device.h"
#include "memory/experts/device_experts.h"
#include "model/synth.h"

namespace strata {
namespace {

class DeviceExpertsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    SynthSpec s;
    s.arch = "qwen3moe";
    s.n_layer = 4;
    s.n_embd = 64;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.expert_ffn = 32;
    s.n_vocab = 300;
    s.type = "f32";
    s.n_threads = 1;
    path_ =
        (std::filesystem::temp_directory_path() / ("strata_devexp_" + std::to_string(::getpid()) + ".gguf"))
            .string();
    auto r = synth_write(s, path_);
    ASSERT_TRUE(r.ok()) << r.message();
    auto f = GgufFile::open(path_);
    ASSERT_TRUE(f.ok()) << f.message();
    file_ = std::move(f).value().release();
  }
  static void TearDownTestSuite() {
    delete file_;
    file_ = nullptr;
    std::filesystem::remove(path_);
  }
  static int placed_in(const DeviceExpertPlan& p, int layer) {
    int n = 0;
    for (int e = 0; e < p.n_expert; ++e) n += p.on_device(layer, e);
    return n;
  }
  static DeviceExpertOptions with_rules(std::vector<DeviceExpertRule> rules) {
    DeviceExpertOptions o;
    o.rules = std::move(rules);
    return o;
  }
  static inline std::string path_;
  static inline GgufFile* file_ = nullptr;
};

TEST_F(DeviceExpertsTest, EveryExpertWithoutRules) {
  auto p = choose_device_experts(*file_, 4, 8, {});
  ASSERT_TRUE(p.ok()) << p.message();
  const uint64_t per = device_expert_bytes(*file_, 0);
  EXPECT_EQ(per, 3u * 64 * 32 * 4);  // three f32 slices of 64 x 32, 256-byte aligned already
  EXPECT_EQ(p->n_placed, 32);
  EXPECT_EQ(p->n_total, 32);
  EXPECT_EQ(p->bytes, 32 * per);
  EXPECT_EQ(p->summary("GPU"), "32 of 32 experts (" + std::string("768.0 KiB") + ") on GPU");
}

TEST_F(DeviceExpertsTest, NCpuMoeAndOverrideRules) {
  DeviceExpertOptions o;
  o.n_cpu_moe = 2;
  auto p = choose_device_experts(*file_, 4, 8, o);
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_EQ(placed_in(*p, 0), 0);
  EXPECT_EQ(placed_in(*p, 1), 0);
  EXPECT_EQ(placed_in(*p, 2), 8);
  EXPECT_EQ(p->n_placed, 16);
  EXPECT_NE(p->summary("GPU").find("layers with every expert on the host: 0-1"), std::string::npos)
      << p->summary("GPU");
  // -ot: layer 0 to the device (first match wins over --n-cpu-moe), layer 3's up tensor to the host
  // (the whole layer stays there).
  o.rules = {{"blk\\.0\\.", false}, {"blk\\.3\\.ffn_up_exps", true}};
  p = choose_device_experts(*file_, 4, 8, o);
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_EQ(placed_in(*p, 0), 8);
  EXPECT_EQ(placed_in(*p, 1), 0);
  EXPECT_EQ(placed_in(*p, 2), 8);
  EXPECT_EQ(placed_in(*p, 3), 0);
  // llama.cpp's usual spelling: every routed expert on the CPU.
  p = choose_device_experts(*file_, 4, 8, with_rules({{"exps", true}}));
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_EQ(p->n_placed, 0);
  EXPECT_EQ(p->bytes, 0u);
}

TEST_F(DeviceExpertsTest, BudgetTakesTheHottestFirst) {
  const uint64_t per = device_expert_bytes(*file_, 0);
  DeviceExpertOptions o;
  o.budgeted = true;
  o.budget_bytes = 5 * per + per / 2;  // five experts
  o.counts.assign(32, 0);
  o.counts[0 * 8 + 3] = 9;  // layer 0 expert 3, the hottest
  o.counts[1 * 8 + 5] = 4;
  o.counts[2 * 8 + 1] = 4;
  auto p = choose_device_experts(*file_, 4, 8, o);
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_EQ(p->n_placed, 5);
  EXPECT_EQ(p->bytes, 5 * per);
  EXPECT_TRUE(p->on_device(0, 3));
  EXPECT_TRUE(p->on_device(1, 5));
  EXPECT_TRUE(p->on_device(2, 1));
  EXPECT_TRUE(p->on_device(3, 0));  // then the ties: the last layer first, lower ids first
  EXPECT_TRUE(p->on_device(3, 1));
  EXPECT_FALSE(p->on_device(3, 2));
  o.budget_bytes = 0;  // nothing fits
  p = choose_device_experts(*file_, 4, 8, o);
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_EQ(p->n_placed, 0);
}

TEST_F(DeviceExpertsTest, BadInputNamesTheProblem) {
  auto p = choose_device_experts(*file_, 4, 8, with_rules({{"blk.(", true}}));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.message().find("'blk.(' is not a regular expression"), std::string::npos) << p.message();
  DeviceExpertOptions o;
  o.counts.assign(7, 1);
  p = choose_device_experts(*file_, 4, 8, o);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.message().find("7 activation counts for 4 layers of 8 experts"), std::string::npos)
      << p.message();
}

TEST_F(DeviceExpertsTest, SourceNamesTheDeviceAndCountsTiers) {
  ThreadPool pool(1);
  CpuDevice dev(pool, "CPU1", 0, /*host_visible=*/false);
  DeviceExpertOptions o;
  o.n_cpu_moe = 3;
  auto p = choose_device_experts(*file_, 4, 8, o);
  ASSERT_TRUE(p.ok()) << p.message();
  auto d = DeviceExperts::open(*file_, dev, *p, nullptr);
  ASSERT_TRUE(d.ok()) << d.message();
  EXPECT_EQ(dev.memory().allocated, p->bytes);
  EXPECT_EQ(dev.memory().buffers, 1);  // one buffer per layer with placed experts
  auto on = (*d)->acquire(3, 6);
  ASSERT_TRUE(on.ok()) << on.message();
  EXPECT_EQ(on->device, &dev);
  EXPECT_EQ(on->on_device.up.in, 64);
  EXPECT_EQ(on->on_device.up.out, 32);
  auto host = (*d)->acquire(0, 6);
  ASSERT_TRUE(host.ok()) << host.message();
  EXPECT_EQ(host->device, nullptr);
  EXPECT_NE(host->gate.data, nullptr);
  EXPECT_FALSE((*d)->acquire(4, 0).ok());
  const int32_t sel[4] = {1, 2, 3, 4};  // 2 tokens x top-2 on layer 3: all on the device
  (*d)->begin_step(2);
  (*d)->on_route(3, nullptr, 2, sel, nullptr, 2);
  (*d)->on_route(0, nullptr, 2, sel, nullptr, 2);
  (*d)->end_step();
  const DeviceExpertTotals t = (*d)->totals();
  EXPECT_EQ(t.tokens, 2u);
  EXPECT_EQ(t.gpu_slots, 4u);
  EXPECT_EQ(t.host_slots, 4u);
  EXPECT_DOUBLE_EQ(t.gpu_per_token(), 2.0);
  d->reset();
  EXPECT_EQ(dev.memory().allocated, 0u);
}

}  // namespace
}  // namespace strata
