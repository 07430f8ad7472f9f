// run_ffn and run_experts on the Vulkan device (kernels/vulkan/vk_ops.cpp) against the CPU device
// for every weight type they have kernels for: gate / up / down through linear.comp, h through
// swiglu.comp in down's activation form on the device, the experts' job-list dispatches. Without
// Vulkan (not built, or no device) the tests skip saying so, and fail under CI=true (lavapipe).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "common/fixtures.h"
#include "kernels/cpu_device.h"
#include "kernels/kernel_test_data.h"
#include "kernels/traits.h"
#if STRATA_HAVE_VULKAN
#include "kernels/vulkan/vk_device.h"
#endif

namespace strata {
namespace {

#if STRATA_HAVE_VULKAN

// Vulkan0 opened once for these tests.
Result<std::unique_ptr<VulkanDevice> >& shared_device() {
  static Result<std::unique_ptr<VulkanDevice> > dev = VulkanDevice::open();
  return dev;
}

#define STRATA_REQUIRE_VULKAN(opened)                                                            \
  if (!(opened).ok()) {                                                                          \
    if (testing::running_in_ci()) FAIL() << "no Vulkan device under CI: " << (opened).message(); \
    GTEST_SKIP() << "no Vulkan device: " << (opened).message();                                  \
  }

using kernel_test::normal;

// A random {in, out} matrix of type t, its bytes and its dequantized values.
struct Mat {
  GgmlType type;
  int64_t in, out;
  size_t row;
  std::vector<uint8_t> bytes;
  std::vector<float> dq;
  Mat(GgmlType t, int64_t in_, int64_t out_, uint32_t seed)
      : type(t), in(in_), out(out_), row(row_bytes(t, in_)) {
    const auto v = normal(static_cast<size_t>(in * out), seed, 0.2f);
    bytes.resize(row * static_cast<size_t>(out));
    dq.resize(v.size());
    for (int64_t r = 0; r < out; ++r) {
      uint8_t* dst = bytes.data() + row * static_cast<size_t>(r);
      if (t == GgmlType::f32)
        std::memcpy(dst, v.data() + r * in, row);
      else
        kernel_traits(t).from_float(v.data() + r * in, dst, in);
      kernel_traits(t).to_float(dst, dq.data() + r * in, in);
    }
  }
  // Σ_k |W[r][k] · x[k]|: the size of output r's terms.
  double terms(int64_t r, const float* x) const {
    return kernel_test::abs_dot(type, bytes.data() + row * static_cast<size_t>(r), GgmlType::f32,
                                reinterpret_cast<const uint8_t*>(x), in);
  }
};

class VulkanFfn : public ::testing::TestWithParam<GgmlType> {};

// run_ffn on Vulkan against run_ffn on the CPU device, for one token and several: per output,
// |Δ| within a tolerance of Σ_j |down[r][j] · h_j| (h = silu(g) ⊙ u from the dequantized
// weights). The products are the CPU's; silu's exp and the division in h's Q8_0 scale are the
// GPU's, so a value of h may round to the neighbouring f16 / bf16 / Q8_0 step where the CPU's
// does not: 1e-5 for F32 weights (h is not rounded), 1e-3 for the others (one such step of one
// h_j, up to 2^-8 of its term for bf16 or amax/127 for Q8_0, can be ~1e-4 of the sum; one wrong
// or missing term is ~1e-2).
TEST_P(VulkanFfn, MatchesTheCpuDevice) {
  auto& opened = shared_device();
  STRATA_REQUIRE_VULKAN(opened);
  VulkanDevice& dev = **opened;
  const GgmlType t = GetParam();
  const bool kq = type_info(t).block_size == QK_K;      // K-quants: rows of whole 256-element blocks
  const int64_t d = kq ? 256 : 64, F = kq ? 512 : 128;  // d != F: the shape error below
  const Mat gate(t, d, F, 2), up(t, d, F, 3), down(t, F, d, 4);
  ThreadPool pool(1);
  CpuDevice cpu(pool);
  std::vector<DeviceBuffer> cb, vb;
  for (const Mat* m : {&gate, &up, &down}) {
    auto c = cpu.import(m->bytes.data(), m->bytes.size(), "w");
    auto v = dev.import(m->bytes.data(), m->bytes.size(), "w");
    ASSERT_TRUE(c.ok() && v.ok());
    cb.push_back(*c);
    vb.push_back(*v);
  }
  const double tol = t == GgmlType::f32 ? 1e-5 : 1e-3;
  double worst = 0.0;
  for (int64_t n : {1, 5}) {
    const auto x = normal(static_cast<size_t>(n * d), 10 + static_cast<uint32_t>(n), 1.0f);
    std::vector<float> want(static_cast<size_t>(n * d)), got(want.size(), NAN);
    DeviceFfnWork fw;
    fw.layer = 1;
    fw.gate = DeviceMat{&cb[0], 0, gate.row, d, F, t};
    fw.up = DeviceMat{&cb[1], 0, up.row, d, F, t};
    fw.down = DeviceMat{&cb[2], 0, down.row, F, d, t};
    fw.x = x.data();
    fw.n = n;
    fw.y = want.data();
    ASSERT_TRUE(cpu.run_ffn(fw).ok());
    fw.gate.buf = &vb[0];
    fw.up.buf = &vb[1];
    fw.down.buf = &vb[2];
    fw.y = got.data();
    auto tk = dev.run_ffn(fw);
    ASSERT_TRUE(tk.ok()) << tk.message();
    ASSERT_TRUE(dev.wait(*tk).ok());
    for (int64_t i = 0; i < n; ++i) {
      std::vector<float> h(static_cast<size_t>(F));
      for (int64_t j = 0; j < F; ++j) {
        double g = 0.0, u = 0.0;
        for (int64_t k = 0; k < d; ++k) {
          g += double(gate.dq[static_cast<size_t>(j * d + k)]) * x[static_cast<size_t>(i * d + k)];
          u += double(up.dq[static_cast<size_t>(j * d + k)]) * x[static_cast<size_t>(i * d + k)];
        }
        h[static_cast<size_t>(j)] = static_cast<float>(g / (1.0 + std::exp(-g)) * u);
      }
      for (int64_t r = 0; r < d; ++r) {
        const size_t k = static_cast<size_t>(i * d + r);
        const double rel = std::fabs(double(got[k]) - want[k]) / down.terms(r, h.data());
        worst = std::max(worst, rel);
        ASSERT_LE(rel, tol) << "token " << i << " output " << r << ": " << got[k] << " vs " << want[k];
      }
    }
  }
  std::printf("run_ffn %s on %s: worst |vulkan - cpu| / sum|down*h| = %.2e\n", type_name(t),
              dev.name().c_str(), worst);
  DeviceFfnWork bad;
  bad.gate = DeviceMat{&vb[0], 0, gate.row, d, F, t};
  bad.up = DeviceMat{&vb[1], 0, up.row, d, F, t};
  bad.down = DeviceMat{&vb[0], 0, gate.row, d, F, t};  // the gate's shape as down
  bad.n = 1;
  auto shapes = dev.run_ffn(bad);
  ASSERT_FALSE(shapes.ok());
  EXPECT_NE(shapes.message().find("do not fit"), std::string::npos) << shapes.message();
  for (auto& b : vb) dev.free(b);
  for (auto& b : cb) cpu.free(b);
}

INSTANTIATE_TEST_SUITE_P(Types, VulkanFfn,
                         ::testing::Values(GgmlType::f32, GgmlType::f16, GgmlType::bf16, GgmlType::q8_0,
                                           GgmlType::q4_0, GgmlType::q5_0, GgmlType::q5_1, GgmlType::mxfp4,
                                           GgmlType::nvfp4, GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k),
                         [](const auto& info) { return std::string(type_info(info.param).name); });

class VulkanExperts : public ::testing::TestWithParam<GgmlType> {};

// run_experts for a subset of a MoE layer's experts (1 and 3 of 4; top-2 routing, weights and a
// down bias; each activation, gpt-oss's with gate / up biases) on Vulkan against the same work on
// the CPU device: the rows of those experts' slots within the FFN test's tolerance of their
// terms' size (times the routing weight), every other row untouched.
TEST_P(VulkanExperts, SubsetMatchesTheCpuDevice) {
  auto& opened = shared_device();
  STRATA_REQUIRE_VULKAN(opened);
  VulkanDevice& dev = **opened;
  const GgmlType t = GetParam();
  const bool kq = type_info(t).block_size == QK_K;  // K-quants: rows of whole 256-element blocks
  const bool b64 = type_info(t).block_size == 64;   // NVFP4: 64-element blocks
  const int64_t d = kq ? 256 : 64, F = kq ? 256 : b64 ? 128 : 96, n = 5;
  constexpr int E = 4, K = 2;
  std::vector<Mat> gate, up, down;
  for (int e = 0; e < E; ++e) {
    gate.emplace_back(t, d, F, 100 + 3 * e);
    up.emplace_back(t, d, F, 101 + 3 * e);
    down.emplace_back(t, F, d, 102 + 3 * e);
  }
  const auto x = normal(static_cast<size_t>(n * d), 7, 1.0f);
  const auto wts = normal(static_cast<size_t>(n * K), 8, 1.0f);
  const auto down_b = normal(static_cast<size_t>(E * d), 9, 0.5f);
  // Token i picks experts i % E and (i + 1 + i / 2) % E.
  std::vector<int32_t> sel(static_cast<size_t>(n * K)), off(E + 1, 0), slots(static_cast<size_t>(n * K)),
      fill(E);
  for (int64_t i = 0; i < n; ++i) {
    sel[static_cast<size_t>(i * K)] = static_cast<int32_t>(i % E);
    sel[static_cast<size_t>(i * K + 1)] = static_cast<int32_t>((i + 1 + i / 2) % E);
  }
  for (int32_t e : sel) off[static_cast<size_t>(e + 1)]++;
  for (int e = 0; e < E; ++e) off[e + 1] += off[e];
  std::copy(off.begin(), off.end() - 1, fill.begin());
  for (int64_t i = 0; i < n * K; ++i)
    slots[static_cast<size_t>(fill[sel[static_cast<size_t>(i)]]++)] = int32_t(i);

  ThreadPool pool(1);
  CpuDevice cpu(pool);
  const std::vector<int32_t> run = {1, 3};
  auto place = [&](Device& dv, std::vector<DeviceBuffer>& bufs, std::vector<DeviceExpert>& mats) {
    bufs.reserve(3 * run.size());
    for (int e : run) {
      DeviceExpert m;
      for (auto [st, dm] :
           {std::pair{&gate[e], &m.gate}, std::pair{&up[e], &m.up}, std::pair{&down[e], &m.down}}) {
        auto b = dv.import(st->bytes.data(), st->bytes.size(), "expert");
        ASSERT_TRUE(b.ok()) << b.message();
        bufs.push_back(*b);
        *dm = DeviceMat{&bufs.back(), 0, st->row, st->in, st->out, t};
      }
      mats.push_back(m);
    }
  };
  std::vector<DeviceBuffer> cbufs, vbufs;
  std::vector<DeviceExpert> cmats, vmats;
  place(cpu, cbufs, cmats);
  place(dev, vbufs, vmats);
  const auto gate_b = normal(static_cast<size_t>(E * F), 11, 0.5f),
             up_b = normal(static_cast<size_t>(E * F), 12, 0.5f);
  DeviceExpertWork w;
  w.layer = 2;
  w.step.d = d;
  w.step.F = F;
  w.step.off = off.data();
  w.step.slots = slots.data();
  w.step.wts = wts.data();
  w.step.down_b = down_b.data();
  w.n_expert = E;
  w.K = K;
  w.experts = run.data();
  w.n_run = static_cast<int>(run.size());
  w.x = x.data();
  w.n = n;
  // Plain SwiGLU; gpt-oss's (α 1.702, limit 7) with gate / up biases; the clamped one (limit 3).
  for (const ExpertAct act : {ExpertAct::expert_act_swiglu, ExpertAct::expert_act_swiglu_oai,
                              ExpertAct::expert_act_swiglu_clamped}) {
    const bool oai = act == ExpertAct::expert_act_swiglu_oai;
    w.step.act = act;
    w.step.alpha = oai ? 1.702f : 0.0f;
    w.step.limit = oai ? 7.0f : act == ExpertAct::expert_act_swiglu_clamped ? 3.0f : 0.0f;
    w.step.gate_b = oai ? gate_b.data() : nullptr;
    w.step.up_b = oai ? up_b.data() : nullptr;
    std::vector<float> want(static_cast<size_t>(n * K * d), 0.0f), got(want.size(), 0.0f);
    w.step.y = want.data();
    w.mats = cmats.data();
    ASSERT_TRUE(cpu.run_experts(w).ok());
    w.step.y = got.data();
    w.mats = vmats.data();
    auto tk = dev.run_experts(w);
    ASSERT_TRUE(tk.ok()) << tk.message();
    ASSERT_TRUE(dev.wait(*tk).ok());
    const double tol = t == GgmlType::f32 ? 1e-5 : 1e-3, L = w.step.limit;
    double worst = 0.0;
    for (int64_t slot = 0; slot < n * K; ++slot) {
      const int e = sel[static_cast<size_t>(slot)];
      const float* xt = x.data() + (slot / K) * d;
      std::vector<float> h(static_cast<size_t>(F));
      for (int64_t j = 0; j < F; ++j) {
        double g = oai ? gate_b[static_cast<size_t>(e * F + j)] : 0.0,
               u = oai ? up_b[static_cast<size_t>(e * F + j)] : 0.0;
        for (int64_t k = 0; k < d; ++k) {
          g += double(gate[e].dq[static_cast<size_t>(j * d + k)]) * xt[k];
          u += double(up[e].dq[static_cast<size_t>(j * d + k)]) * xt[k];
        }
        if (L > 0) g = std::min(g, L), u = std::clamp(u, -L, L);
        const double a = oai ? w.step.alpha : 1.0;
        h[static_cast<size_t>(j)] = static_cast<float>(g / (1.0 + std::exp(-a * g)) * (oai ? u + 1.0 : u));
      }
      for (int64_t r = 0; r < d; ++r) {
        const size_t k = static_cast<size_t>(slot * d + r);
        if (e != 1 && e != 3) {
          ASSERT_EQ(got[k], 0.0f) << "slot " << slot << " of expert " << e << " was written";
          continue;
        }
        const double mag = std::fabs(wts[static_cast<size_t>(slot)]) *
                           (down[e].terms(r, h.data()) + std::fabs(down_b[static_cast<size_t>(e * d + r)]));
        const double rel = std::fabs(double(got[k]) - want[k]) / mag;
        worst = std::max(worst, rel);
        ASSERT_LE(rel, tol) << "act " << int(act) << " slot " << slot << " output " << r << ": " << got[k]
                            << " vs " << want[k];
      }
    }
    std::printf("run_experts %s act %d on %s: worst |vulkan - cpu| / (|wt| sum|down*h|) = %.2e\n",
                type_name(t), int(act), dev.name().c_str(), worst);
  }
  for (auto& b : vbufs) dev.free(b);
  for (auto& b : cbufs) cpu.free(b);
}

INSTANTIATE_TEST_SUITE_P(Types, VulkanExperts,
                         ::testing::Values(GgmlType::f32, GgmlType::f16, GgmlType::bf16, GgmlType::q8_0,
                                           GgmlType::q4_0, GgmlType::q5_0, GgmlType::q5_1, GgmlType::mxfp4,
                                           GgmlType::nvfp4, GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k),
                         [](const auto& info) { return std::string(type_info(info.param).name); });

#endif  // STRATA_HAVE_VULKAN

}  // namespace
}  // namespace strata
