// The device seam's CPU implementation (kernels/cpu_device.h): buffers and their accounting, the
// queue's copies and tickets, errors that name the problem, and run_experts giving the bits of the
// host's grouped expert FFN (kernels/expert_ffn.h) for any subset of the experts.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu_device.h"
#include "kernels/traits.h"

namespace strata {
namespace {

TEST(CpuDevice, BuffersCopiesAndTickets) {
  ThreadPool pool(1);
  CpuDevice dev(pool, "CPU1");
  EXPECT_EQ(dev.name(), "CPU1");
  EXPECT_EQ(dev.kind(), DeviceKind::device_cpu);
  auto a = dev.alloc(1000, "a");
  auto b = dev.alloc(24, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->id, b->id);
  EXPECT_EQ(dev.memory().allocated, 1024u);
  EXPECT_EQ(dev.memory().buffers, 2);
  std::vector<uint8_t> src(300), back(300);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
  auto t1 = dev.upload(*a, 700, src.data(), src.size());
  ASSERT_TRUE(t1.ok()) << t1.message();
  auto t2 = dev.download(back.data(), *a, 700, back.size());
  ASSERT_TRUE(t2.ok()) << t2.message();
  EXPECT_GT(*t2, *t1);
  EXPECT_TRUE(dev.reached(*t2));
  EXPECT_TRUE(dev.wait(*t2).ok());
  EXPECT_EQ(back, src);
  dev.free(*a);
  EXPECT_EQ(a->id, 0u);
  EXPECT_EQ(dev.memory().allocated, 24u);
  EXPECT_EQ(dev.memory().peak, 1024u);
  dev.free(*a);  // empty: no-op
  dev.free(*b);
  EXPECT_EQ(dev.memory().allocated, 0u);
  EXPECT_EQ(dev.memory().buffers, 0);
}

TEST(CpuDevice, ErrorsNameTheProblem) {
  ThreadPool pool(1);
  CpuDevice dev(pool, "CPU", /*budget_bytes=*/4096);
  CpuDevice other(pool, "CPU2");
  auto a = dev.alloc(100, "experts");
  ASSERT_TRUE(a.ok());
  auto over = dev.alloc(4000, "more experts");
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.message().find("no room for more experts"), std::string::npos) << over.message();
  EXPECT_FALSE(dev.alloc(0, "nothing").ok());
  uint8_t buf[64] = {};
  auto outside = dev.upload(*a, 90, buf, 20);
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.message().find("outside buffer"), std::string::npos) << outside.message();
  EXPECT_FALSE(dev.download(buf, *a, 101, 0).ok());
  auto foreign = other.upload(*a, 0, buf, 8);
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.message().find("not a live buffer"), std::string::npos) << foreign.message();
  DeviceBuffer freed = *a;
  dev.free(*a);
  EXPECT_FALSE(dev.upload(freed, 0, buf, 8).ok());
  auto never = dev.wait(1000);
  ASSERT_FALSE(never.ok());
  EXPECT_NE(never.message().find("ticket 1000"), std::string::npos) << never.message();
}

// Random expert stacks of one type, quantized row by row.
struct Stack {
  GgmlType type;
  int64_t in, out, E;
  size_t row = 0, mat = 0;
  std::vector<uint8_t> bytes;
  Stack(GgmlType t, int64_t in_, int64_t out_, int64_t e, uint32_t seed) : type(t), in(in_), out(out_), E(e) {
    row = row_bytes(t, in);
    mat = row * static_cast<size_t>(out);
    bytes.resize(mat * static_cast<size_t>(E));
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, 0.2f);
    std::vector<float> r(static_cast<size_t>(in));
    for (int64_t i = 0; i < out * E; ++i) {
      for (auto& v : r) v = dist(rng);
      if (t == GgmlType::f32)
        std::memcpy(bytes.data() + static_cast<size_t>(i) * row, r.data(), row);
      else
        kernel_traits(t).from_float(r.data(), bytes.data() + static_cast<size_t>(i) * row, in);
    }
  }
  ExpertMat host(int e) const { return {bytes.data() + mat * static_cast<size_t>(e), row, in, type}; }
};

class CpuDeviceExperts : public ::testing::TestWithParam<GgmlType> {};

TEST_P(CpuDeviceExperts, SubsetOnTheDeviceHasTheHostBits) {
  const GgmlType t = GetParam();
  constexpr int64_t d = 256, F = 256, n = 5;
  constexpr int E = 4, K = 2;
  const Stack gate(t, d, F, E, 1), up(t, d, F, E, 2), down(t, F, d, E, 3);
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * d)), wts(static_cast<size_t>(n * K));
  for (auto& v : x) v = dist(rng);
  for (auto& v : wts) v = dist(rng);
  // Token t picks experts t % E and (t + 1 + t / 2) % E: every expert gets slots.
  std::vector<int32_t> sel(static_cast<size_t>(n * K));
  for (int64_t i = 0; i < n; ++i) {
    sel[static_cast<size_t>(i * K)] = static_cast<int32_t>(i % E);
    sel[static_cast<size_t>(i * K + 1)] = static_cast<int32_t>((i + 1 + i / 2) % E);
  }
  std::vector<int32_t> off(E + 1, 0), slots(static_cast<size_t>(n * K)), fill(E);
  for (int32_t e : sel) off[static_cast<size_t>(e + 1)]++;
  for (int e = 0; e < E; ++e) off[e + 1] += off[e];
  std::copy(off.begin(), off.end() - 1, fill.begin());
  for (int64_t i = 0; i < n * K; ++i)
    slots[static_cast<size_t>(fill[sel[static_cast<size_t>(i)]]++)] = int32_t(i);

  ThreadPool pool(2);
  auto host_run = [&](const std::vector<int32_t>& experts, std::vector<float>& y) {
    Arena arena;
    std::vector<ExpertMat> g(E), u(E), dn(E);
    for (int e = 0; e < E; ++e) {
      g[e] = gate.host(e);
      u[e] = up.host(e);
      dn[e] = down.host(e);
    }
    ExpertFfn s;
    s.d = d;
    s.F = F;
    s.off = off.data();
    s.slots = slots.data();
    s.wts = wts.data();
    s.gate = g.data();
    s.up = u.data();
    s.down = dn.data();
    s.y = y.data();
    expert_ffn_prepare(s, g[0], u[0], dn[0], x.data(), n, K, E, pool.size(), arena);
    const ExpertFfnJob job{&s, experts.data(), static_cast<int>(experts.size())};
    expert_ffn_run(&job, 1, pool);
  };
  std::vector<float> ref(static_cast<size_t>(n * K * d), 0.0f), y(ref.size(), 0.0f);
  host_run({0, 1, 2, 3}, ref);

  // Experts 1 and 3 on the device (their bytes uploaded), 0 and 2 on the host.
  CpuDevice dev(pool, "CPU1");
  std::vector<DeviceBuffer> bufs;
  std::vector<DeviceExpert> mats;
  for (int k = 0; k < 2; ++k) {
    auto b = dev.alloc(gate.mat + up.mat + down.mat, "expert");
    ASSERT_TRUE(b.ok()) << b.message();
    bufs.push_back(*b);
  }
  int i = 0;
  for (int e : {1, 3}) {
    const DeviceBuffer& b = bufs[static_cast<size_t>(i++)];
    DeviceExpert m;
    size_t o = 0;
    for (auto [st, dm] : {std::pair{&gate, &m.gate}, std::pair{&up, &m.up}, std::pair{&down, &m.down}}) {
      ASSERT_TRUE(dev.upload(b, o, st->host(e).data, st->mat).ok());
      *dm = DeviceMat{&b, o, st->row, st->in, st->out, t};
      o += st->mat;
    }
    mats.push_back(m);
  }
  EXPECT_EQ(dev.memory().allocated, 2 * (gate.mat + up.mat + down.mat));
  host_run({0, 2}, y);
  const std::vector<int32_t> on_dev = {1, 3};
  DeviceExpertWork w;
  w.step.d = d;
  w.step.F = F;
  w.step.off = off.data();
  w.step.slots = slots.data();
  w.step.wts = wts.data();
  w.step.y = y.data();
  w.n_expert = E;
  w.K = K;
  w.experts = on_dev.data();
  w.mats = mats.data();
  w.n_run = 2;
  w.x = x.data();
  w.n = n;
  auto tk = dev.run_experts(w);
  ASSERT_TRUE(tk.ok()) << tk.message();
  ASSERT_TRUE(dev.wait(*tk).ok());
  EXPECT_EQ(std::memcmp(y.data(), ref.data(), sizeof(float) * y.size()), 0) << "device subset changed bits";

  // A matrix that reaches past its buffer is an error, not a read out of bounds.
  mats[0].down.offset = bufs[0].bytes - down.row;
  auto bad = dev.run_experts(w);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("outside buffer"), std::string::npos) << bad.message();
}

INSTANTIATE_TEST_SUITE_P(Types, CpuDeviceExperts,
                         ::testing::Values(GgmlType::f32, GgmlType::q8_0, GgmlType::q4_0, GgmlType::mxfp4),
                         [](const auto& info) { return std::string(type_info(info.param).name); });

}  // namespace
}  // namespace strata
