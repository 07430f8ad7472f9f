// The Vulkan device behind the seam (kernels/vulkan/vk_device.h), on whatever Vulkan device the
// machine has (CI: Mesa's lavapipe): device names and listing, buffers and their accounting,
// the queue's copies and tickets, errors that name the problem, and run_linear matching the CPU
// device for every weight type it has kernels for (run_ffn / run_experts: vulkan_ffn_test.cpp).
// Without Vulkan (not built, or no device) the tests skip saying so, and fail under CI=true,
// where lavapipe is installed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/units.h"
#include "common/fixtures.h"
#include "kernels/cpu_device.h"
#include "kernels/kernel_test_data.h"
#include "kernels/traits.h"
#if STRATA_HAVE_VULKAN
#include "kernels/vulkan/vk_device.h"
#endif

namespace strata {
namespace {

#if !STRATA_HAVE_VULKAN

TEST(VulkanDevice, NotBuilt) {
  if (testing::running_in_ci()) FAIL() << "built without Vulkan (CI installs libvulkan-dev and glslc)";
  GTEST_SKIP() << "built without the Vulkan device (needs the Vulkan headers and glslc: libvulkan-dev glslc)";
}

#else

// Vulkan0 opened once for the tests that need no budget.
Result<std::unique_ptr<VulkanDevice> >& shared_device() {
  static Result<std::unique_ptr<VulkanDevice> > dev = VulkanDevice::open();
  return dev;
}

#define STRATA_REQUIRE_VULKAN(opened)                                                            \
  if (!(opened).ok()) {                                                                          \
    if (testing::running_in_ci()) FAIL() << "no Vulkan device under CI: " << (opened).message(); \
    GTEST_SKIP() << "no Vulkan device: " << (opened).message();                                  \
  }

TEST(VulkanDevice, ListsDevicesByLlamaCppNames) {
  auto& opened = shared_device();
  STRATA_REQUIRE_VULKAN(opened);
  auto list = list_vulkan_devices();
  ASSERT_TRUE(list.ok()) << list.message();
  ASSERT_FALSE(list->empty());
  for (size_t i = 0; i < list->size(); ++i) EXPECT_EQ((*list)[i].name, "Vulkan" + std::to_string(i));
  const VulkanDevice& dev = **opened;
  EXPECT_EQ(dev.name(), "Vulkan0");
  EXPECT_EQ(dev.kind(), DeviceKind::device_gpu);
  EXPECT_EQ(dev.info().description, (*list)[0].description);
  std::printf("Vulkan0: %s (%s, %s, timeline semaphores: %s)\n", dev.info().description.c_str(),
              dev.info().type.c_str(), format_bytes(dev.info().memory_bytes).c_str(),
              dev.info().timeline ? "yes" : "no");
  auto missing = VulkanDevice::open("Vulkan99");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("no device Vulkan99; there are Vulkan0"), std::string::npos)
      << missing.message();
}

void copies_and_tickets(VulkanDevice& dev) {
  const DeviceMemory before = dev.memory();
  auto a = dev.alloc(1000, "a");
  auto b = dev.alloc(24, "b");
  ASSERT_TRUE(a.ok() && b.ok()) << (a.ok() ? b.message() : a.message());
  EXPECT_NE(a->id, b->id);
  EXPECT_EQ(a->host, nullptr);  // only the queue reads and writes device memory
  EXPECT_EQ(dev.memory().allocated - before.allocated, 1024u);
  EXPECT_EQ(dev.memory().buffers - before.buffers, 2);
  std::vector<uint8_t> src(300), back(300), whole(1000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
  auto t1 = dev.upload(*a, 700, src.data(), src.size());
  ASSERT_TRUE(t1.ok()) << t1.message();
  auto t2 = dev.download(back.data(), *a, 700, back.size());
  ASSERT_TRUE(t2.ok()) << t2.message();
  EXPECT_GT(*t2, *t1);
  ASSERT_TRUE(dev.wait(*t2).ok());
  EXPECT_TRUE(dev.reached(*t1));
  EXPECT_TRUE(dev.reached(*t2));
  EXPECT_EQ(back, src);
  // Queued back to back without waiting: the queue keeps their order.
  std::vector<uint8_t> ones(1000, 1), twos(500, 2);
  ASSERT_TRUE(dev.upload(*a, 0, ones.data(), ones.size()).ok());
  ASSERT_TRUE(dev.upload(*a, 250, twos.data(), twos.size()).ok());
  auto t3 = dev.download(whole.data(), *a, 0, whole.size());
  ASSERT_TRUE(t3.ok()) << t3.message();
  auto empty = dev.download(nullptr, *a, 1000, 0);  // 0 bytes at the end: a ticket, no copy
  ASSERT_TRUE(empty.ok()) << empty.message();
  ASSERT_TRUE(dev.wait(*empty).ok());
  EXPECT_TRUE(dev.reached(*t3));
  for (size_t i = 0; i < whole.size(); ++i) ASSERT_EQ(whole[i], i >= 250 && i < 750 ? 2 : 1) << i;
  dev.free(*a);
  EXPECT_EQ(a->id, 0u);
  EXPECT_EQ(dev.memory().allocated - before.allocated, 24u);
  EXPECT_GE(dev.memory().peak, before.allocated + 1024u);
  dev.free(*a);  // empty: no-op
  dev.free(*b);
  EXPECT_EQ(dev.memory().allocated, before.allocated);
  EXPECT_EQ(dev.memory().buffers, before.buffers);

  std::vector<uint8_t> w(4000);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint8_t>(i * 13 + 5);
  auto imp = dev.import(w.data(), w.size(), "weights");  // a copy: alloc + upload
  ASSERT_TRUE(imp.ok()) << imp.message();
  EXPECT_EQ(imp->host, nullptr);
  EXPECT_EQ(dev.memory().allocated - before.allocated, w.size());
  EXPECT_EQ(dev.memory().imported, 0u);
  std::vector<uint8_t> wback(w.size());
  auto t4 = dev.download(wback.data(), *imp, 0, wback.size());
  ASSERT_TRUE(t4.ok() && dev.wait(*t4).ok());
  EXPECT_EQ(wback, w);
  dev.free(*imp);
  EXPECT_FALSE(dev.import(nullptr, 10, "nothing").ok());
}

TEST(VulkanDevice, BuffersCopiesAndTickets) {
  auto& opened = shared_device();
  STRATA_REQUIRE_VULKAN(opened);
  copies_and_tickets(**opened);
}

// The timeline kept with a fence per submission (devices without timeline semaphores).
TEST(VulkanDevice, BuffersCopiesAndTicketsOnFences) {
  auto& opened = shared_device();
  STRATA_REQUIRE_VULKAN(opened);
  auto fenced = VulkanDevice::open("Vulkan0", 0, /*timeline=*/false);
  ASSERT_TRUE(fenced.ok()) << fenced.message();
  EXPECT_FALSE((*fenced)->timeline());
  copies_and_tickets(**fenced);
}

TEST(VulkanDevice, ErrorsNameTheProblem) {
  auto& opened = shared_device();
  STRATA_REQUIRE_VULKAN(opened);
  VulkanDevice& other = **opened;
  auto budgeted = VulkanDevice::open("Vulkan0", /*budget_bytes=*/4096);
  ASSERT_TRUE(budgeted.ok()) << budgeted.message();
  VulkanDevice& dev = **budgeted;
  auto a = dev.alloc(100, "experts");
  ASSERT_TRUE(a.ok()) << a.message();
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
  auto ffn = dev.run_ffn(DeviceFfnWork{});
  ASSERT_FALSE(ffn.ok());
  EXPECT_NE(ffn.message().find("run_ffn: gate has no buffer"), std::string::npos) << ffn.message();
  auto attn = dev.run_attention(DeviceAttnWork{});
  ASSERT_FALSE(attn.ok());
  EXPECT_NE(attn.message().find("run_attention on layer 0: 0 tokens in 0 segments"), std::string::npos)
      << attn.message();
  EXPECT_FALSE(dev.run_experts(DeviceExpertWork{}).ok());  // no experts, K 0
  EXPECT_EQ(dev.memory().allocated, 0u);
}

using kernel_test::normal;

class VulkanLinear : public ::testing::TestWithParam<GgmlType> {};

// run_linear on Vulkan against run_linear on the CPU device: per output, |Δ| ≤ 1e-5 · Σ|w·x|
// (the same products, summed in another order), for one token (decode) and several, with and
// without a bias, the matrix at a 2-byte (quantized, f16) or 4-byte (f32) aligned offset past a
// 256-byte boundary and the bias 300 bytes into its buffer (bound from the boundary before them).
// K-quant rows are one 256-element super-block here: the per-block arithmetic is the CPU's
// (integer sums, then d_w·d_x times them as quant/'s vec_dot scales them), so the CPU's bits.
TEST_P(VulkanLinear, MatchesTheCpuDevice) {
  auto& opened = shared_device();
  STRATA_REQUIRE_VULKAN(opened);
  VulkanDevice& dev = **opened;
  const GgmlType t = GetParam();
  const bool kq = type_info(t).block_size == QK_K;
  const int64_t in = 256, out = 100;  // 100: not a whole number of workgroups' rows
  const size_t row = row_bytes(t, in), off = t == GgmlType::f32 ? 264 : 262;
  const auto wf = normal(static_cast<size_t>(in * out), 1, 0.2f);
  std::vector<uint8_t> bytes(off + row * static_cast<size_t>(out), 0xa5);
  for (int64_t r = 0; r < out; ++r) {
    uint8_t* dst = bytes.data() + off + row * static_cast<size_t>(r);
    if (t == GgmlType::f32)
      std::memcpy(dst, wf.data() + r * in, row);
    else
      kernel_traits(t).from_float(wf.data() + r * in, dst, in);
  }
  const auto bias = normal(out, 5, 1.0f);
  constexpr size_t kBiasOff = 300;
  std::vector<uint8_t> bias_bytes(kBiasOff + sizeof(float) * bias.size(), 0x5a);
  std::memcpy(bias_bytes.data() + kBiasOff, bias.data(), sizeof(float) * bias.size());

  ThreadPool pool(1);
  CpuDevice cpu(pool);
  auto cw = cpu.import(bytes.data(), bytes.size(), "w");
  auto cb = cpu.import(bias_bytes.data(), bias_bytes.size(), "bias");
  auto vw = dev.import(bytes.data(), bytes.size(), "w");
  auto vb = dev.import(bias_bytes.data(), bias_bytes.size(), "bias");
  ASSERT_TRUE(cw.ok() && cb.ok() && vw.ok() && vb.ok());
  double worst = 0.0;
  for (int64_t n : {1, 5, 11}) {  // 11: a full tile of 8 tokens and a partial one
    for (bool with_bias : {false, true}) {
      const auto x = normal(static_cast<size_t>(n * in), 6 + static_cast<uint32_t>(n), 1.0f);
      std::vector<float> want(static_cast<size_t>(n * out)), got(want.size(), NAN);
      DeviceLinearWork lw;
      lw.w = DeviceMat{&*cw, off, row, in, out, t};
      lw.bias = with_bias ? DeviceVec{&*cb, kBiasOff, out} : DeviceVec{};
      lw.x = x.data();
      lw.n = n;
      lw.y = want.data();
      ASSERT_TRUE(cpu.run_linear(lw).ok());
      lw.w.buf = &*vw;
      lw.bias.buf = with_bias ? &*vb : nullptr;
      lw.y = got.data();
      auto tk = dev.run_linear(lw);
      ASSERT_TRUE(tk.ok()) << tk.message();
      ASSERT_TRUE(dev.wait(*tk).ok());
      for (int64_t i = 0; i < n; ++i)
        for (int64_t r = 0; r < out; ++r) {
          const double mag =
              (with_bias ? std::fabs(bias[static_cast<size_t>(r)]) : 0.0) +
              kernel_test::abs_dot(t, bytes.data() + off + row * static_cast<size_t>(r), GgmlType::f32,
                                   reinterpret_cast<const uint8_t*>(x.data() + i * in), in);
          const size_t j = static_cast<size_t>(i * out + r);
          const double rel = std::fabs(double(got[j]) - want[j]) / mag;
          worst = std::max(worst, rel);
          ASSERT_LE(rel, 1e-5) << "token " << i << " row " << r << ": " << got[j] << " vs " << want[j];
          if (kq) {  // one super-block: the CPU's integer sums and scaling, and no sum over blocks
            ASSERT_EQ(got[j], want[j]) << "token " << i << " row " << r;
          }
        }
    }
  }
  std::printf("run_linear %s on %s: worst |vulkan - cpu| / sum|w*x| = %.2e\n", type_name(t),
              dev.name().c_str(), worst);

  // Bad work names the problem and queues nothing.
  DeviceLinearWork bad;
  std::vector<float> x(static_cast<size_t>(in)), y(static_cast<size_t>(out));
  bad.x = x.data();
  bad.y = y.data();
  bad.n = 1;
  bad.w = DeviceMat{&*vw, off + row, row, in, out, t};  // one row past the buffer
  auto past = dev.run_linear(bad);
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.message().find("outside buffer"), std::string::npos) << past.message();
  bad.w = DeviceMat{&*vw, off, row, in, out, GgmlType::iq4_nl};
  auto type = dev.run_linear(bad);
  ASSERT_FALSE(type.ok());
  EXPECT_NE(type.message().find(std::string("has type ") + type_name(GgmlType::iq4_nl) +
                                ", which has no Vulkan kernel"),
            std::string::npos)
      << type.message();
  if (t != GgmlType::mxfp4 && t != GgmlType::nvfp4) {  // 17- / 36-byte blocks: any offset
    bad.w = DeviceMat{&*vw, 1, row, in, out - 1, t};
    EXPECT_FALSE(dev.run_linear(bad).ok()) << "odd offset";
  }
  for (auto* b : {&*vw, &*vb}) dev.free(*b);
  for (auto* b : {&*cw, &*cb}) cpu.free(*b);
}

// linear.comp computes tokens in tiles of 8 and, where the device has subgroup arithmetic, a row
// per subgroup (else a row per workgroup, STRATA_VK_SUBGROUP=0): in either build each token's
// row is the same bits in a batch of 11 as alone and within MatchesTheCpuDevice's 1e-5 of Σ|w·x|
// of the CPU device's, and the device's queue reports its submissions and (with timestamps) its
// busy time.
TEST_P(VulkanLinear, TokenTilesGiveEachTokenItsOwnBits) {
  auto& opened = shared_device();
  STRATA_REQUIRE_VULKAN(opened);
  setenv("STRATA_VK_SUBGROUP", "0", 1);
  auto tree = VulkanDevice::open();
  unsetenv("STRATA_VK_SUBGROUP");
  ASSERT_TRUE(tree.ok()) << tree.message();
  const GgmlType t = GetParam();
  const int64_t in = 512, out = 40, n = 11;
  const size_t row = row_bytes(t, in);
  const auto wf = normal(static_cast<size_t>(in * out), 21, 0.2f);
  std::vector<uint8_t> bytes(row * static_cast<size_t>(out));
  for (int64_t r = 0; r < out; ++r) {
    uint8_t* dst = bytes.data() + row * static_cast<size_t>(r);
    if (t == GgmlType::f32)
      std::memcpy(dst, wf.data() + r * in, row);
    else
      kernel_traits(t).from_float(wf.data() + r * in, dst, in);
  }
  const auto x = normal(static_cast<size_t>(n * in), 22, 1.0f);
  std::vector<float> want(static_cast<size_t>(n * out));
  {
    ThreadPool pool(1);
    CpuDevice cpu(pool);
    auto cw = cpu.import(bytes.data(), bytes.size(), "w");
    ASSERT_TRUE(cw.ok()) << cw.message();
    DeviceLinearWork lw;
    lw.w = DeviceMat{&*cw, 0, row, in, out, t};
    lw.x = x.data();
    lw.n = n;
    lw.y = want.data();
    ASSERT_TRUE(cpu.run_linear(lw).ok());
    cpu.free(*cw);
  }
  for (VulkanDevice* dev : {opened->get(), tree->get()}) {
    const DeviceTiming before = dev->timing();
    auto w = dev->import(bytes.data(), bytes.size(), "w");
    ASSERT_TRUE(w.ok()) << w.message();
    auto run = [&](const float* xs, int64_t count, float* y) {
      DeviceLinearWork lw;
      lw.w = DeviceMat{&*w, 0, row, in, out, t};
      lw.x = xs;
      lw.n = count;
      lw.y = y;
      auto tk = dev->run_linear(lw);
      ASSERT_TRUE(tk.ok()) << tk.message();
      ASSERT_TRUE(dev->wait(*tk).ok());
    };
    std::vector<float> batch(static_cast<size_t>(n * out), NAN), one(static_cast<size_t>(out), NAN);
    run(x.data(), n, batch.data());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t r = 0; r < out; ++r) {
        const double mag = kernel_test::abs_dot(t, bytes.data() + row * static_cast<size_t>(r), GgmlType::f32,
                                                reinterpret_cast<const uint8_t*>(x.data() + i * in), in);
        const size_t j = static_cast<size_t>(i * out + r);
        ASSERT_LE(std::fabs(double(batch[j]) - want[j]), 1e-5 * mag)
            << (dev == tree->get() ? "tree" : "default") << " build, token " << i << " row " << r;
      }
    for (int64_t i = 0; i < n; ++i) {
      run(x.data() + i * in, 1, one.data());
      for (int64_t r = 0; r < out; ++r)
        ASSERT_EQ(one[static_cast<size_t>(r)], batch[static_cast<size_t>(i * out + r)])
            << (dev == tree->get() ? "tree" : "default") << " build, token " << i << " row " << r;
    }
    const DeviceTiming after = dev->timing();
    EXPECT_GE(after.submissions - before.submissions, static_cast<uint64_t>(n + 1));
    EXPECT_GE(after.busy_s, before.busy_s);
    dev->free(*w);
  }
}

// The device's roofline for bench: a copy between two of its buffers, timed by its timestamps.
TEST(VulkanDevice, CopyBandwidthIsTimedOnTheDevice) {
  auto& opened = shared_device();
  STRATA_REQUIRE_VULKAN(opened);
  auto bw = (*opened)->copy_bandwidth(size_t{8} << 20);
  ASSERT_TRUE(bw.ok()) << bw.message();
  EXPECT_GT(*bw, 1e6);  // bytes per second
  auto tiny = (*opened)->copy_bandwidth(100);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.message().find("at least 4 KiB"), std::string::npos) << tiny.message();
  auto budgeted = VulkanDevice::open("Vulkan0", /*budget_bytes=*/1 << 20);
  ASSERT_TRUE(budgeted.ok()) << budgeted.message();
  auto over = (*budgeted)->copy_bandwidth(size_t{1} << 20);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.message().find("budget"), std::string::npos) << over.message();
}

// The pipeline cache on disk (vk_pipeline_cache.h): written when a device closes, its header the
// device's; a file of garbage is ignored (the device still runs) and replaced; "off" writes none.
TEST(VulkanDevice, PipelineCacheIsKeptOnDisk) {
  auto& opened = shared_device();
  STRATA_REQUIRE_VULKAN(opened);
  const std::string path = ::testing::TempDir() + "strata_vk_cache_test.bin";
  std::remove(path.c_str());
  auto size_of = [&] {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return -1L;
    std::fseek(f, 0, SEEK_END);
    const long n = std::ftell(f);
    std::fclose(f);
    return n;
  };
  auto run_once = [&] {
    auto dev = VulkanDevice::open();
    ASSERT_TRUE(dev.ok()) << dev.message();
    const float w[32] = {1.0f}, x[32] = {2.0f};
    auto buf = (*dev)->import(w, sizeof w, "w");
    ASSERT_TRUE(buf.ok()) << buf.message();
    float y = 0;
    DeviceLinearWork lw;
    lw.w = DeviceMat{&*buf, 0, sizeof w, 32, 1, GgmlType::f32};
    lw.x = x;
    lw.n = 1;
    lw.y = &y;
    auto tk = (*dev)->run_linear(lw);
    ASSERT_TRUE(tk.ok()) << tk.message();
    ASSERT_TRUE((*dev)->wait(*tk).ok());
    EXPECT_EQ(y, 2.0f);
    (*dev)->free(*buf);
  };
  setenv("STRATA_VK_PIPELINE_CACHE", "off", 1);
  run_once();
  EXPECT_EQ(size_of(), -1L) << "off writes no file";
  setenv("STRATA_VK_PIPELINE_CACHE", path.c_str(), 1);
  run_once();
  const long written = size_of();
  EXPECT_GE(written, 32L) << "the header: size, version, vendor, device, UUID";
  run_once();  // read back; nothing new to write
  EXPECT_EQ(size_of(), written);
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    const char junk[64] = "not a pipeline cache";
    std::fwrite(junk, 1, sizeof junk, f);
    std::fclose(f);
  }
  run_once();  // ignored, and replaced by the device's own
  EXPECT_EQ(size_of(), written);
  unsetenv("STRATA_VK_PIPELINE_CACHE");
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Types, VulkanLinear,
                         ::testing::Values(GgmlType::f32, GgmlType::f16, GgmlType::bf16, GgmlType::q8_0,
                                           GgmlType::q4_0, GgmlType::q5_0, GgmlType::q5_1, GgmlType::mxfp4,
                                           GgmlType::nvfp4, GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k),
                         [](const auto& info) { return std::string(type_info(info.param).name); });

#endif

}  // namespace
}  // namespace strata
