#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <vector>

#include "base/cpu_features.h"
#include "base/fp16.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "base/units.h"

namespace strata {
namespace {

TEST(Units, ParseSizeSuffixes) {
  EXPECT_EQ(parse_size("4096").value(), 4096u);
  EXPECT_EQ(parse_size("800M").value(), 800ull << 20);
  EXPECT_EQ(parse_size("2K").value(), 2048u);
  EXPECT_EQ(parse_size("1.5G").value(), 3ull << 29);
  EXPECT_EQ(parse_size("3GiB").value(), 3ull << 30);
  EXPECT_FALSE(parse_size("12X").ok());
  EXPECT_FALSE(parse_size("").ok());
  EXPECT_FALSE(parse_size("-1M").ok());
  EXPECT_NE(parse_size("12X").message().find("12X"), std::string::npos);
}

TEST(Status, TryPropagates) {
  auto inner = [](bool fail) -> Result<int> {
    if (fail) return err("bad thing %d", 7);
    return 3;
  };
  auto outer = [&](bool fail) -> Result<int> {
    STRATA_ASSIGN(int v, inner(fail));
    return v + 1;
  };
  EXPECT_EQ(outer(false).value(), 4);
  EXPECT_EQ(outer(true).message(), "bad thing 7");
}

TEST(Fp16, RoundTripAndRounding) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;  // nan payloads
    EXPECT_EQ(f32_to_fp16(fp16_to_f32(static_cast<uint16_t>(h))), h);
  }
  EXPECT_EQ(f32_to_fp16(1.0f + 1.0f / 2048), f32_to_fp16(1.0f));  // tie -> even
  EXPECT_EQ(f32_to_fp16(65520.0f), 0x7c00);
  EXPECT_EQ(fp16_to_f32(f32_to_fp16(1e-7f)), fp16_to_f32(2));  // subnormal: 1e-7 ≈ 1.68 * 2^-24
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);  // tie -> even (down)
}

TEST(ThreadPool, ParallelForCoversRangeOnce) {
  for (int nt : {1, 2, 3, 5}) {
    ThreadPool pool(nt);
    for (int64_t n : {0, 1, 7, 64, 1000}) {
      std::vector<std::atomic<int>> hit(static_cast<size_t>(n));
      pool.parallel_for(
          n,
          [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) hit[static_cast<size_t>(i)]++;
          },
          4);
      for (auto& h : hit) EXPECT_EQ(h.load(), 1);
    }
  }
}

// More threads than cores: shares of late workers are run by the caller, each exactly once.
TEST(ThreadPool, RunCallsEveryShareOnceUnderOversubscription) {
  ThreadPool pool(7);
  std::vector<std::atomic<int>> hits(7);
  for (int r = 0; r < 3000; ++r) {
    for (auto& h : hits) h.store(0);
    pool.run([&](int t, int n) {
      EXPECT_EQ(n, 7);
      hits[static_cast<size_t>(t)]++;
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1) << "run " << r;
  }
}

TEST(CpuFeatures, ActiveIsaIsSupported) {
  EXPECT_TRUE(isa_supported(active_isa()));
  EXPECT_TRUE(isa_supported(Isa::scalar));
}

}  // namespace
}  // namespace strata
