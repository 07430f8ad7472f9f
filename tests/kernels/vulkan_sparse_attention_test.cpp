// VulkanDevice::run_sparse_attention against CpuDevice::run_sparse_attention (DeepSeek-V4's
// attention core, kernels/sparse_attention.h) on three shapes: window only (a ring), HCA-like
// (every visible compressed row, ratio 8) and CSA-like (the rows a selection names, ratio 4;
// head_dim 512 as DeepSeek-V4's), with and without sinks; each over a series of calls of 1 to 9
// tokens, so later calls read the window and compressed rows each device wrote itself. Per
// output |Δ| <= 1e-5 · max|row| (o is a convex combination of rows, less with a sink); the rows
// the op wrote are the same bits on both devices.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/fixtures.h"
#include "kernels/cpu_device.h"
#include "kernels/kernel_test_data.h"
#if STRATA_HAVE_VULKAN
#include "kernels/vulkan/vk_device.h"
#endif

namespace strata {
namespace {

#if STRATA_HAVE_VULKAN

using kernel_test::normal;

struct SparseShape {
  const char* name;
  int n_head, hd, window, ratio;
  bool select, sinks;
  int64_t n_ctx;
};

void PrintTo(const SparseShape& s, std::ostream* os) {
  *os << s.name;
}

class VulkanSparseAttention : public ::testing::TestWithParam<SparseShape> {};

TEST_P(VulkanSparseAttention, MatchesTheCpuDevice) {
  static Result<std::unique_ptr<VulkanDevice>> opened = VulkanDevice::open();
  if (!opened.ok()) {
    if (testing::running_in_ci()) FAIL() << "no Vulkan device under CI: " << opened.message();
    GTEST_SKIP() << "no Vulkan device: " << opened.message();
  }
  VulkanDevice& dev = **opened;
  const SparseShape& sh = GetParam();
  ThreadPool pool(1);
  CpuDevice cpu(pool);
  const std::vector<int64_t> chunks = {5, 1, 9, 3, 1, 1, 7, 2};
  const int64_t max_chunk = 9, hd = sh.hd, qw = int64_t{sh.n_head} * hd;
  const int64_t win_cap = sh.window - 1 + max_chunk, comp_cap = sh.ratio ? sh.n_ctx / sh.ratio : 1;
  const auto sinks = normal(static_cast<size_t>(sh.n_head), 7, 1.0f);
  std::vector<DeviceBuffer*> cpu_bufs, vk_bufs;
  auto both = [&](size_t bytes, const void* data, DeviceBuffer& cb, DeviceBuffer& vb) {
    auto c = cpu.alloc(bytes, "t");
    auto v = dev.alloc(bytes, "t");
    ASSERT_TRUE(c.ok() && v.ok()) << (c.ok() ? v.message() : c.message());
    cb = *c;
    vb = *v;
    cpu_bufs.push_back(&cb);
    vk_bufs.push_back(&vb);
    std::vector<uint8_t> zeros(bytes, 0);
    const void* src = data ? data : zeros.data();
    auto t1 = cpu.upload(cb, 0, src, bytes);
    auto t2 = dev.upload(vb, 0, src, bytes);
    ASSERT_TRUE(t1.ok() && t2.ok() && dev.wait(*t2).ok());
  };
  DeviceBuffer cw, vw, cc, vc, cs, vs;
  const size_t row_b = sizeof(float) * static_cast<size_t>(hd);
  both(row_b * static_cast<size_t>(win_cap), nullptr, cw, vw);
  both(row_b * static_cast<size_t>(comp_cap), nullptr, cc, vc);
  both(sizeof(float) * sinks.size(), sinks.data(), cs, vs);

  std::mt19937 rng(11);
  int64_t pos = 0;
  double worst = 0.0;
  for (size_t call = 0; call < chunks.size(); ++call) {
    const int64_t n = chunks[call];
    const uint32_t seed = 100 + static_cast<uint32_t>(call);
    const auto q = normal(static_cast<size_t>(n * qw), seed, 1.0f);
    const auto kv = normal(static_cast<size_t>(n * hd), seed + 50, 1.0f);
    const int64_t row0 = sh.ratio ? pos / sh.ratio : 0, n_new = sh.ratio ? (pos + n) / sh.ratio - row0 : 0;
    const auto cn = normal(static_cast<size_t>(std::max<int64_t>(n_new, 1) * hd), seed + 80, 1.0f);
    const int64_t stride = 5;
    std::vector<int32_t> sel(static_cast<size_t>(n * stride), 0), sel_n(static_cast<size_t>(n), 0);
    for (int64_t t = 0; sh.select && t < n; ++t) {  // a sorted choice of up to 5 visible rows
      const int64_t vis = (pos + t + 1) / sh.ratio;
      std::vector<int32_t> all(static_cast<size_t>(vis));
      for (int64_t j = 0; j < vis; ++j) all[j] = static_cast<int32_t>(j);
      std::shuffle(all.begin(), all.end(), rng);
      const int64_t k = std::min(vis, stride);
      std::sort(all.begin(), all.begin() + k);
      std::copy(all.begin(), all.begin() + k, sel.begin() + t * stride);
      sel_n[t] = static_cast<int32_t>(k);
    }
    std::vector<float> want(static_cast<size_t>(n * qw)), got(want.size(), NAN);
    auto work = [&](bool vk_side) {
      DeviceSparseAttnWork w;
      w.layer = 2;
      w.n_head = sh.n_head;
      w.head_dim = sh.hd;
      w.window = sh.window;
      w.ratio = sh.ratio;
      w.scale = 1.0f / std::sqrt(static_cast<float>(hd));
      if (sh.sinks) w.sinks = DeviceVec{vk_side ? &vs : &cs, 0, sh.n_head};
      w.win = DeviceRows{vk_side ? &vw : &cw, 0, hd, win_cap, true};
      if (sh.ratio) w.comp = DeviceRows{vk_side ? &vc : &cc, 0, hd, comp_cap, false};
      w.pos0 = pos;
      w.n = n;
      w.q = q.data();
      w.kv_new = kv.data();
      w.comp_new = cn.data();
      w.comp_row0 = row0;
      w.n_comp_new = n_new;
      if (sh.select) {
        w.sel = sel.data();
        w.sel_n = sel_n.data();
        w.sel_stride = stride;
      }
      w.out = vk_side ? got.data() : want.data();
      return w;
    };
    auto ct = cpu.run_sparse_attention(work(false));
    ASSERT_TRUE(ct.ok()) << ct.message();
    auto vt = dev.run_sparse_attention(work(true));
    ASSERT_TRUE(vt.ok()) << vt.message();
    ASSERT_TRUE(dev.wait(*vt).ok());
    // every row holds N(0, 1) values: max|row| is below 6
    for (size_t i = 0; i < want.size(); ++i) {
      const double d = std::fabs(double(want[i]) - double(got[i]));
      worst = std::max(worst, d);
      ASSERT_LE(d, 6e-5) << sh.name << ": call " << call << " output " << i << ": " << want[i] << " vs "
                         << got[i];
    }
    pos += n;
  }
  // the rows each device wrote are the same bits
  for (auto [c, v, cap] : {std::tuple{&cw, &vw, win_cap}, std::tuple{&cc, &vc, comp_cap}}) {
    std::vector<float> a(static_cast<size_t>(cap * hd)), b(a.size());
    ASSERT_TRUE(cpu.download(a.data(), *c, 0, sizeof(float) * a.size()).ok());
    auto t = dev.download(b.data(), *v, 0, sizeof(float) * b.size());
    ASSERT_TRUE(t.ok() && dev.wait(*t).ok());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), sizeof(float) * a.size()), 0) << sh.name;
  }
  std::printf("[ sparse attention %s: max |dout| %.3g over %lld positions ]\n", sh.name, worst,
              static_cast<long long>(pos));
  for (DeviceBuffer* b : cpu_bufs) cpu.free(*b);
  for (DeviceBuffer* b : vk_bufs) dev.free(*b);
}

INSTANTIATE_TEST_SUITE_P(Shapes, VulkanSparseAttention,
                         ::testing::Values(SparseShape{"window", 4, 64, 8, 0, false, true, 64},
                                           SparseShape{"hca", 3, 96, 6, 8, false, false, 64},
                                           SparseShape{"csa", 2, 512, 4, 4, true, true, 64}),
                         [](const ::testing::TestParamInfo<SparseShape>& i) {
                           return std::string(i.param.name);
                         });

// Bad input gets an error naming the problem, on both devices: a selection of a row the token
// cannot see, and rows of a type the device cannot read there (the CPU reads any KV type of whole
// blocks, Vulkan f32 rows).
TEST(VulkanSparseAttention, RejectsBadWork) {
  static Result<std::unique_ptr<VulkanDevice>> opened = VulkanDevice::open();
  if (!opened.ok()) GTEST_SKIP() << "no Vulkan device: " << opened.message();
  ThreadPool pool(1);
  CpuDevice cpu(pool);
  for (Device* d : {static_cast<Device*>(&cpu), static_cast<Device*>(opened->get())}) {
    auto wb = d->alloc(sizeof(float) * 8 * 16, "w");
    auto cb = d->alloc(sizeof(float) * 8 * 16, "c");
    ASSERT_TRUE(wb.ok() && cb.ok());
    const std::vector<float> q(2 * 8, 0.5f), kv(8, 0.25f);
    std::vector<float> out(16);
    const int32_t sel[2] = {3, 0}, sel_n[1] = {1};
    DeviceSparseAttnWork w;
    w.n_head = 2;
    w.head_dim = 8;
    w.window = 4;
    w.ratio = 4;
    w.win = DeviceRows{&*wb, 0, 8, 16, true};
    w.comp = DeviceRows{&*cb, 0, 8, 16, false};
    w.pos0 = 7;
    w.n = 1;
    w.q = q.data();
    w.kv_new = kv.data();
    w.sel = sel;
    w.sel_n = sel_n;
    w.sel_stride = 2;
    w.out = out.data();
    auto r = d->run_sparse_attention(w);  // position 7 sees compressed rows 0 and 1
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.message().find("selects compressed row 3 of the 2"), std::string::npos) << r.message();
    w.sel = nullptr;
    w.win.type = GgmlType::q8_0;  // heads of 8 values: not whole blocks (the CPU), not f32 (Vulkan)
    r = d->run_sparse_attention(w);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.message().find("plain f32 rows") != std::string::npos ||
                r.message().find("KV rows of whole blocks") != std::string::npos)
        << r.message();
    d->free(*wb);
    d->free(*cb);
  }
}

#endif  // STRATA_HAVE_VULKAN

}  // namespace
}  // namespace strata
