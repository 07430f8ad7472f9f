// The device seam's layer ops on the CPU device (kernels/cpu_device.h): imported weights (in place
// on a host-visible device, copies on one whose memory the process cannot address), and
// run_linear / run_ffn / run_attention giving the bits of the host kernels they wrap
// (kernels/linear.h, expert_ffn.h, attention_block.h) — KV rows written included — on both kinds;
// bad work names the problem.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "kernels/attention_block.h"
#include "kernels/cpu_device.h"
#include "kernels/expert_ffn.h"
#include "kernels/kernel_test_data.h"
#include "kernels/linear.h"
#include "kernels/traits.h"

namespace strata {
namespace {

std::vector<float> rnd(size_t n, uint32_t seed, float scale) {
  return kernel_test::normal(n, seed, scale);
}

// A random {in, out} matrix of type t: its bytes and a TensorView over them.
struct Mat {
  std::vector<uint8_t> bytes;
  TensorView view;
  Mat(GgmlType t, int64_t in, int64_t out, uint32_t seed) {
    const auto v = rnd(static_cast<size_t>(in * out), seed, 0.2f);
    const size_t row = row_bytes(t, in);
    bytes.resize(row * static_cast<size_t>(out));
    for (int64_t r = 0; r < out; ++r) {
      if (t == GgmlType::f32)
        std::memcpy(bytes.data() + row * r, v.data() + r * in, row);
      else
        kernel_traits(t).from_float(v.data() + r * in, bytes.data() + row * r, in);
    }
    view.type = t;
    view.n_dims = 2;
    view.ne[0] = in;
    view.ne[1] = out;
    tensor_view_set_contiguous(&view);
    view.data = bytes.data();
  }
};

// The matrix and vector imported into a device (buffers freed with the device's lifetime).
struct Imported {
  Device& dev;
  std::vector<DeviceBuffer> bufs;
  explicit Imported(Device& d) : dev(d) { bufs.reserve(64); }
  ~Imported() {
    for (auto& b : bufs) dev.free(b);
  }
  DeviceMat mat(const Mat& m) {
    auto b = dev.import(m.bytes.data(), m.bytes.size(), "w");
    EXPECT_TRUE(b.ok()) << b.message();
    bufs.push_back(*b);
    return DeviceMat{&bufs.back(), 0, m.view.nb[1], m.view.ne[0], m.view.ne[1], m.view.type};
  }
  DeviceVec vec(const std::vector<float>& v) {
    auto b = dev.import(v.data(), sizeof(float) * v.size(), "v");
    EXPECT_TRUE(b.ok()) << b.message();
    bufs.push_back(*b);
    return DeviceVec{&bufs.back(), 0, static_cast<int64_t>(v.size())};
  }
};

TEST(CpuDevice, ImportsInPlaceOrAsCopies) {
  ThreadPool pool(1);
  std::vector<uint8_t> w(4000);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint8_t>(i * 13 + 5);
  CpuDevice host(pool);
  auto a = host.import(w.data(), w.size(), "weights");
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ(a->host, w.data());
  EXPECT_EQ(host.memory().imported, w.size());
  EXPECT_EQ(host.memory().allocated, 0u);
  host.free(*a);
  EXPECT_EQ(host.memory().imported, 0u);
  EXPECT_FALSE(host.import(nullptr, 10, "nothing").ok());

  CpuDevice hidden(pool, "GPU-like", /*budget_bytes=*/0, /*host_visible=*/false);
  auto b = hidden.import(w.data(), w.size(), "weights");
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ(b->host, nullptr);
  EXPECT_EQ(hidden.memory().allocated, w.size());
  std::vector<uint8_t> back(w.size());
  ASSERT_TRUE(hidden.download(back.data(), *b, 0, back.size()).ok());
  EXPECT_EQ(back, w);
  auto c = hidden.alloc(64, "rows");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, nullptr);
  hidden.free(*b);
  hidden.free(*c);
  EXPECT_EQ(hidden.memory().allocated, 0u);
}

struct OpsCase {
  GgmlType type;
  bool host_visible;
};
class CpuDeviceOps : public ::testing::TestWithParam<OpsCase> {};

TEST_P(CpuDeviceOps, LinearAndFfnHaveTheKernelsBits) {
  const auto [t, visible] = GetParam();
  ThreadPool pool(2);
  CpuDevice dev(pool, "D", 0, visible);
  Imported im(dev);
  const int64_t d = 64, F = 96, n = 5;
  const Mat w(t, d, F, 1), gate(t, d, F, 2), up(t, d, F, 3), down(t, F, d, 4);
  const auto bias = rnd(F, 5, 1.0f);
  const auto x = rnd(static_cast<size_t>(n * d), 6, 1.0f);
  Arena arena(1 << 20);

  std::vector<float> want(static_cast<size_t>(n * F)), got(want.size(), -1.0f);
  linear(pool, arena, w.view, x.data(), n, want.data(), bias.data());
  DeviceLinearWork lw;
  lw.w = im.mat(w);
  lw.bias = im.vec(bias);
  lw.x = x.data();
  lw.n = n;
  lw.y = got.data();
  auto tk = dev.run_linear(lw);
  ASSERT_TRUE(tk.ok()) << tk.message();
  ASSERT_TRUE(dev.wait(*tk).ok());
  EXPECT_EQ(std::memcmp(want.data(), got.data(), sizeof(float) * want.size()), 0);

  std::vector<float> fwant(static_cast<size_t>(n * d)), fgot(fwant.size(), -1.0f);
  arena.reset();
  ffn_swiglu_forward(gate.view, up.view, down.view, x.data(), n, fwant.data(), pool, arena);
  DeviceFfnWork fw;
  fw.gate = im.mat(gate);
  fw.up = im.mat(up);
  fw.down = im.mat(down);
  fw.x = x.data();
  fw.n = n;
  fw.y = fgot.data();
  fw.host_scratch = &arena;
  tk = dev.run_ffn(fw);
  ASSERT_TRUE(tk.ok()) << tk.message();
  EXPECT_EQ(std::memcmp(fwant.data(), fgot.data(), sizeof(float) * fwant.size()), 0);

  // Shapes that do not fit, named.
  fw.down = fw.gate;
  auto bad = dev.run_ffn(fw);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("do not fit"), std::string::npos) << bad.message();
  lw.bias.n = F - 1;
  bad = dev.run_linear(lw);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("bias has 95 values, expected 96"), std::string::npos) << bad.message();
}

// Two sequences in one block (3 prefill rows at 0.., 1 decode row at 7): the outputs and the
// K / V rows written equal attention_forward_segments' on host caches.
TEST_P(CpuDeviceOps, AttentionHasTheKernelsBits) {
  const auto [t, visible] = GetParam();
  ThreadPool pool(2);
  CpuDevice dev(pool, "D", 0, visible);
  Imported im(dev);
  AttnConfig c;
  c.n_embd = 64;
  c.n_head = 4;
  c.n_head_kv = 2;
  c.head_dim_k = c.head_dim_v = 32;
  c.rope.n_rot = 32;
  c.scale = 0.17f;
  const int64_t kw = 64, vw = 64, cap = 16, n = 4;
  const Mat wq(t, 64, 128, 11), wk(t, 64, kw, 12), wv(t, 64, vw, 13), wo(t, 128, 64, 14);
  const auto bq = rnd(128, 15, 0.5f), qn = rnd(32, 16, 1.0f), sinks = rnd(4, 17, 1.0f);
  AttnWeights aw;
  aw.wq = &wq.view;
  aw.wk = &wk.view;
  aw.wv = &wv.view;
  aw.wo = &wo.view;
  aw.bq = bq.data();
  aw.q_norm = qn.data();
  aw.sinks = sinks.data();
  const auto x = rnd(static_cast<size_t>(n * 64), 18, 1.0f);
  // Host caches: sequence 1 has 7 earlier rows.
  std::vector<float> k0(cap * kw, 0.0f), v0(cap * vw, 0.0f), k1 = rnd(cap * kw, 19, 1.0f),
                                                             v1 = rnd(cap * vw, 20, 1.0f);
  const std::vector<float> k1_init = k1, v1_init = v1;
  const KvRows hk0 = KvRows::f32(k0.data(), kw, cap, false), hv0 = KvRows::f32(v0.data(), vw, cap, false);
  const KvRows hk1 = KvRows::f32(k1.data(), kw, cap, false), hv1 = KvRows::f32(v1.data(), vw, cap, false);
  const AttnSegment segs[2] = {{&hk0, &hv0, 0, 0, 3}, {&hk1, &hv1, 7, 3, 1}};
  std::vector<float> want(static_cast<size_t>(n * 64)), got(want.size(), -1.0f);
  Arena arena(1 << 20);
  attention_forward_segments(c, aw, segs, x.data(), n, want.data(), pool, arena);

  // The device: the same caches' starting bytes in its buffers.
  DeviceBuffer kv[4];
  const std::vector<float>* init[4] = {nullptr, nullptr, &k1_init, &v1_init};
  for (int i = 0; i < 4; ++i) {
    auto b = dev.alloc(sizeof(float) * cap * 64, "kv");
    ASSERT_TRUE(b.ok());
    kv[i] = *b;
    const std::vector<float> zero(cap * 64, 0.0f);
    ASSERT_TRUE(dev.upload(kv[i], 0, (init[i] ? *init[i] : zero).data(), sizeof(float) * cap * 64).ok());
  }
  DeviceAttnWork w;
  w.cfg = c;
  w.wq = im.mat(wq);
  w.wk = im.mat(wk);
  w.wv = im.mat(wv);
  w.wo = im.mat(wo);
  w.bq = im.vec(bq);
  w.q_norm = im.vec(qn);
  w.sinks = im.vec(sinks);
  const DeviceAttnSeg dsegs[2] = {{{&kv[0], 0, kw, cap, false}, {&kv[1], 0, vw, cap, false}, 0, 0, 3},
                                  {{&kv[2], 0, kw, cap, false}, {&kv[3], 0, vw, cap, false}, 7, 3, 1}};
  w.segs = dsegs;
  w.n_seg = 2;
  w.x = x.data();
  w.n = n;
  w.out = got.data();
  auto tk = dev.run_attention(w);
  ASSERT_TRUE(tk.ok()) << tk.message();
  EXPECT_EQ(std::memcmp(want.data(), got.data(), sizeof(float) * want.size()), 0);
  const std::vector<float>* host_rows[4] = {&k0, &v0, &k1, &v1};
  for (int i = 0; i < 4; ++i) {
    std::vector<float> back(cap * 64);
    ASSERT_TRUE(dev.download(back.data(), kv[i], 0, sizeof(float) * back.size()).ok());
    EXPECT_EQ(back, *host_rows[i]) << "cache " << i;
  }

  // Segments that do not cover the rows, a cache too short, a cache of the wrong width.
  w.n = 5;
  auto bad = dev.run_attention(w);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("cover 4 of 5 rows"), std::string::npos) << bad.message();
  w.n = n;
  DeviceAttnSeg short_segs[2] = {dsegs[0], dsegs[1]};
  short_segs[1].k.capacity = short_segs[1].v.capacity = 7;
  w.segs = short_segs;
  bad = dev.run_attention(w);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("segment 1"), std::string::npos) << bad.message();
  short_segs[1] = dsegs[1];
  short_segs[1].k.width = 32;
  bad = dev.run_attention(w);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("expected width 64"), std::string::npos) << bad.message();
  for (auto& b : kv) dev.free(b);
}

INSTANTIATE_TEST_SUITE_P(Types, CpuDeviceOps,
                         ::testing::Values(OpsCase{GgmlType::f32, true}, OpsCase{GgmlType::q8_0, true},
                                           OpsCase{GgmlType::q4_0, false}, OpsCase{GgmlType::f16, false}),
                         [](const auto& info) {
                           return std::string(type_name(info.param.type)) +
                                  (info.param.host_visible ? "_host" : "_hidden");
                         });

}  // namespace
}  // namespace strata
