// choose_device_experts (memory/experts/device_experts.h) on a synth qwen3moe (4 layers of 8
// experts): every expert without rules; --n-cpu-moe keeps the first layers on the host; -ot rules
// match tensor names, the first match wins and a layer one of whose tensors stays on the host keeps
// all its experts there; a budget takes the hottest experts (profile counts), ties to the later
// layers; the bytes are device_expert_bytes per placed expert; a bad regex or counts of the wrong
// size are errors naming the problem. DeviceExperts on a host-visible CPU device then hands out
// the placed experts with the device named and counts the routed slots per tier. Miss slots
// (--miss-policy copy): reserved before the hot set when some expert misses, none when nothing
// does; uploads land at a slot's offsets (the expert's bytes); a layer with more misses than slots
// hands them out in turns (ready / wait_any); an expert still in a slot runs again without an upload;
// a decode step uploads the next layer's predicted misses ahead.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "format/tensor_names.h"
#include "kernels/cpu_device.h"
#include "memory/experts/device_experts.h"
#include "memory/experts/prefetch.h"
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

TEST_F(DeviceExpertsTest, MissSlotsCopyInTurnsAndHit) {
  ThreadPool pool(1);
  CpuDevice dev(pool, "CPU1", 0, /*host_visible=*/true);
  const uint64_t per = device_expert_bytes(*file_, 0);
  DeviceExpertOptions o;
  o.miss = MissPolicy::miss_copy;
  o.miss_slots = 2;
  auto all = choose_device_experts(*file_, 4, 8, o);  // every expert fits: no slot
  ASSERT_TRUE(all.ok()) << all.message();
  EXPECT_EQ(all->miss_slots, 0);
  o.n_cpu_moe = 3;  // layers 0-2 miss
  auto p = choose_device_experts(*file_, 4, 8, o);
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_EQ(p->n_placed, 8);
  EXPECT_EQ(p->miss_slots, 2);
  EXPECT_EQ(p->miss_slot_bytes, per);
  auto d = DeviceExperts::open(*file_, dev, *p, nullptr);
  ASSERT_TRUE(d.ok()) << d.message();
  EXPECT_EQ(dev.memory().allocated, p->bytes + 2 * per);

  // The expert's bytes where the views say they are.
  auto holds = [&](const ExpertViews& v, int layer, int e) {
    const DeviceMat* m[3] = {&v.on_device.gate, &v.on_device.up, &v.on_device.down};
    for (int i = 0; i < kRoutedExpertParts; ++i) {
      const TensorView* t = file_->find_tensor(blk_name(layer, kRoutedExpertPartNames[i]));
      if (t == nullptr || m[i]->buf == nullptr || m[i]->buf->host == nullptr) return false;
      if (std::memcmp(m[i]->buf->host + m[i]->offset, t->row(0, e), t->nb[2]) != 0) return false;
    }
    return true;
  };
  // 3 tokens x top-2 on layer 0: expert 1 twice, 2..5 once: five misses over two slots.
  const int32_t sel[6] = {1, 2, 3, 4, 5, 1};
  (*d)->begin_step(3);
  (*d)->on_route(0, nullptr, 3, sel, nullptr, 2);
  std::vector<int32_t> pending = {1, 2, 3, 4, 5}, last;
  int rounds = 0;
  while (!pending.empty()) {
    std::vector<int32_t> batch;
    if (rounds > 0) {  // as the MoE loop: wait_any hands out one whose slot is free
      const int k = (*d)->wait_any(0, pending.data(), static_cast<int>(pending.size()));
      ASSERT_TRUE(k >= 0 && k < static_cast<int>(pending.size()));
      ASSERT_TRUE((*d)->ready(0, pending[static_cast<size_t>(k)]));
    }
    for (int32_t e : pending)
      if ((*d)->ready(0, e)) batch.push_back(e);
    ASSERT_FALSE(batch.empty());
    ASSERT_LE(batch.size(), 2u);
    for (int32_t e : batch) {
      auto v = (*d)->acquire(0, e);
      ASSERT_TRUE(v.ok()) << v.message();
      EXPECT_EQ(v->device, &dev);
      EXPECT_TRUE(holds(*v, 0, e)) << "expert " << e;
    }
    for (int32_t e : batch) {
      (*d)->release(0, e);
      pending.erase(std::find(pending.begin(), pending.end(), e));
    }
    last = batch;
    ++rounds;
  }
  (*d)->end_step();
  EXPECT_EQ(rounds, 3);
  DeviceExpertTotals t = (*d)->totals();
  EXPECT_EQ(t.miss.copy_experts, 5u);
  EXPECT_EQ(t.miss.copy_slots, 6u);
  EXPECT_EQ(t.miss.copies, 5u);
  EXPECT_EQ(t.miss.slot_hits, 0u);
  EXPECT_EQ(t.miss.copy_bytes, 5 * per);
  EXPECT_EQ(t.miss.host_experts, 0u);
  EXPECT_EQ(t.gpu_slots, 6u);
  EXPECT_EQ(t.host_slots, 0u);
  // The next step routes the last round's expert(s) again: still in their slots, no upload.
  const int32_t again[2] = {last[0], last.size() > 1 ? last[1] : (last[0] == 1 ? 2 : 1)};
  (*d)->begin_step(1);
  (*d)->on_route(0, nullptr, 1, again, nullptr, 2);
  for (int32_t e : again) {
    ASSERT_TRUE((*d)->ready(0, e));
    auto v = (*d)->acquire(0, e);
    ASSERT_TRUE(v.ok()) << v.message();
    EXPECT_TRUE(holds(*v, 0, e)) << "expert " << e;
  }
  for (int32_t e : again) (*d)->release(0, e);
  (*d)->end_step();
  t = (*d)->totals();
  EXPECT_EQ(t.miss.slot_hits, last.size());
  EXPECT_EQ(t.miss.copies, 5u + (2 - last.size()));
  EXPECT_EQ((*d)->miss_layers()[0].copy_experts, 7u);
  EXPECT_EQ((*d)->miss_layers()[3].copy_experts, 0u);  // layer 3's experts are placed
  d->reset();
  EXPECT_EQ(dev.memory().allocated, 0u);
}

// copy, decode: after routing layer 0 the router look-ahead's picks for layer 1 are uploaded into
// the slots layer 0 left free, and layer 1 finds them there (hits, the expert's bytes).
TEST_F(DeviceExpertsTest, CopyPrefetchesTheNextLayersPredictedMisses) {
  ThreadPool pool(1);
  CpuDevice dev(pool, "CPU1", 0, /*host_visible=*/true);
  DeviceExpertOptions o;
  o.n_cpu_moe = 3;
  o.miss = MissPolicy::miss_copy;
  o.miss_slots = default_miss_slots(o.miss, 2);
  auto p = choose_device_experts(*file_, 4, 8, o);
  ASSERT_TRUE(p.ok()) << p.message();
  ASSERT_EQ(p->miss_slots, 4);
  auto d = DeviceExperts::open(*file_, dev, *p, nullptr);
  ASSERT_TRUE(d.ok()) << d.message();
  std::vector<float> x(64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7 + 3) % 11) - 5.0f;
  auto la = RouterLookahead::build(*file_, 4, 8, 2);
  ASSERT_TRUE(la.ok()) << la.message();
  std::vector<uint8_t> mark(8, 0);
  la->predict(1, x.data(), 1, mark.data());
  std::vector<int32_t> next;
  for (int e = 0; e < 8; ++e)
    if (mark[static_cast<size_t>(e)]) next.push_back(e);
  ASSERT_EQ(next.size(), 2u);
  const int32_t sel0[2] = {next[0] == 0 ? 1 : 0, 7};  // layer 0: any two
  (*d)->begin_step(1);
  (*d)->on_route(0, x.data(), 1, sel0, nullptr, 2);
  for (int32_t e : sel0) ASSERT_TRUE((*d)->acquire(0, e).ok());
  for (int32_t e : sel0) (*d)->release(0, e);
  DeviceExpertTotals t = (*d)->totals();
  EXPECT_EQ(t.miss.prefetches, 2u);
  EXPECT_EQ(t.miss.copies, 4u);
  EXPECT_EQ((*d)->miss_layers()[1].prefetches, 2u);
  (*d)->on_route(1, x.data(), 1, next.data(), nullptr, 2);
  for (int32_t e : next) {
    ASSERT_TRUE((*d)->ready(1, e));
    auto v = (*d)->acquire(1, e);
    ASSERT_TRUE(v.ok()) << v.message();
    EXPECT_EQ(v->device, &dev);
    const TensorView* down = file_->find_tensor(blk_name(1, kRoutedExpertPartNames[routed_expert_down]));
    ASSERT_NE(down, nullptr);
    EXPECT_EQ(
        std::memcmp(v->on_device.down.buf->host + v->on_device.down.offset, down->row(0, e), down->nb[2]), 0);
  }
  for (int32_t e : next) (*d)->release(1, e);
  (*d)->end_step();
  t = (*d)->totals();
  EXPECT_EQ(t.miss.slot_hits, 2u);
  EXPECT_EQ(t.miss.copies, 4u + 2u);  // layer 1's look-ahead uploaded layer 2's picks in turn
  EXPECT_EQ(t.miss.prefetches, 4u);
}

// cpu keeps every miss on the host and reserves no slot; auto does too until the host's rate is
// measured (its first step: the calibration measures only the upload and the device).
TEST_F(DeviceExpertsTest, MissesOnTheHostUnderCpuAndUnmeasuredAuto) {
  ThreadPool pool(1);
  for (MissPolicy policy : {MissPolicy::miss_cpu, MissPolicy::miss_auto}) {
    CpuDevice dev(pool, "CPU1", 0, /*host_visible=*/true);
    DeviceExpertOptions o;
    o.n_cpu_moe = 3;
    o.miss = policy;
    o.miss_slots = default_miss_slots(policy, 2);
    auto p = choose_device_experts(*file_, 4, 8, o);
    ASSERT_TRUE(p.ok()) << p.message();
    EXPECT_EQ(p->miss_slots, policy == MissPolicy::miss_cpu ? 0 : 4);
    auto d = DeviceExperts::open(*file_, dev, *p, nullptr);
    ASSERT_TRUE(d.ok()) << d.message();
    const int32_t sel[4] = {1, 2, 3, 1};
    (*d)->begin_step(2);
    (*d)->on_route(0, nullptr, 2, sel, nullptr, 2);
    for (int32_t e : {1, 2, 3}) {
      EXPECT_TRUE((*d)->ready(0, e));
      auto v = (*d)->acquire(0, e);
      ASSERT_TRUE(v.ok()) << v.message();
      EXPECT_EQ(v->device, nullptr) << miss_policy_name(policy);  // the host's views
      (*d)->release(0, e);
    }
    (*d)->end_step();
    const DeviceExpertTotals t = (*d)->totals();
    EXPECT_EQ(t.miss.host_experts, 3u);
    EXPECT_EQ(t.miss.host_slots, 4u);
    EXPECT_EQ(t.miss.copy_experts, 0u);
    EXPECT_EQ(t.host_slots, 4u);
  }
}

}  // namespace
}  // namespace strata
