// Cross-check against llama.cpp's own quantizer: dequantize every Q8_0 / Q4_0 / MXFP4 tensor of
// the fixture models with strata's kernels and compare with the same tensor of the f32 parent.
// Expected: quantization noise (rel. RMS ≈ 0.4 % for Q8_0, ≈ 10 % for Q4_0) and exact equality
// for the MXFP4 experts (generated on the MXFP4 grid). A wrong nibble order or scale would give
// errors of order 100 %.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "common/fixtures.h"
#include "format/gguf.h"
#include "kernels/matmul.h"

namespace strata {
namespace {

struct Pair {
  const char* quant;
  const char* parent;
};

TEST(FixtureDequant, QuantizedTensorsMatchF32Parents) {
  STRATA_REQUIRE_FIXTURES(dir);
  const Pair pairs[] = {
      {"tiny-qwen3moe-Q8_0", "tiny-qwen3moe-f32"},        {"tiny-qwen3moe-Q4_0", "tiny-qwen3moe-f32"},
      {"tiny-llama-moe-Q4_0", "tiny-llama-moe-f32"},      {"tiny-qwen2moe-Q8_0", "tiny-qwen2moe-f32"},
      {"tiny-gpt-oss-MXFP4", "tiny-gpt-oss-f32"},         {"tiny-gpt-oss-MXFP4_MOE", "tiny-gpt-oss-f32"},
      {"tiny-deepseek4-MXFP4_MOE", "tiny-deepseek4-f32"},
  };
  // Worst relative RMS error per type over all files.
  std::map<GgmlType, double> worst;
  std::map<GgmlType, int> count;
  for (const Pair& p : pairs) {
    auto q = GgufFile::open(dir + "/models/" + p.quant + ".gguf");
    auto f = GgufFile::open(dir + "/models/" + p.parent + ".gguf");
    ASSERT_TRUE(q.ok()) << q.message();
    ASSERT_TRUE(f.ok()) << f.message();
    for (const TensorView& t : (*q)->tensors()) {
      if (t.type != GgmlType::q8_0 && t.type != GgmlType::q4_0 && t.type != GgmlType::mxfp4) continue;
      const TensorView* ref = (*f)->find_tensor(t.name);
      ASSERT_NE(ref, nullptr) << p.parent << " lacks " << t.name;
      ASSERT_EQ(ref->type, GgmlType::f32);
      ASSERT_EQ(ref->n_elements(), t.n_elements()) << t.name;
      std::vector<float> row(static_cast<size_t>(t.ne[0]));
      double e2 = 0, r2 = 0;
      for (int64_t i3 = 0; i3 < t.ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < t.ne[2]; ++i2) {
          for (int64_t i1 = 0; i1 < t.ne[1]; ++i1) {
            ASSERT_TRUE(dequantize_row(t.type, t.row(i1, i2, i3), row.data(), t.ne[0]).ok());
            const float* fr = reinterpret_cast<const float*>(ref->row(i1, i2, i3));
            for (int64_t i0 = 0; i0 < t.ne[0]; ++i0) {
              e2 += (double(row[i0]) - fr[i0]) * (double(row[i0]) - fr[i0]);
              r2 += double(fr[i0]) * fr[i0];
            }
          }
        }
      }
      const double rel = std::sqrt(e2 / (r2 + 1e-300));
      worst[t.type] = std::max(worst[t.type], rel);
      count[t.type]++;
      const bool lossless_experts = t.type == GgmlType::mxfp4;
      const double limit = t.type == GgmlType::q8_0 ? 0.01 : (t.type == GgmlType::q4_0 ? 0.15 : 0.0);
      if (lossless_experts) {
        EXPECT_EQ(e2, 0.0) << p.quant << " " << t.name << ": MXFP4 experts should be exact";
      } else {
        EXPECT_LT(rel, limit) << p.quant << " " << t.name << " " << type_name(t.type);
      }
    }
  }
  for (auto& [t, w] : worst) {
    std::printf("  %-6s %3d tensors, worst rel. RMS vs f32 parent %.3g\n", type_name(t), count[t], w);
  }
  EXPECT_GT(count[GgmlType::q8_0], 0);
  EXPECT_GT(count[GgmlType::q4_0], 0);
  EXPECT_GT(count[GgmlType::mxfp4], 0);
}

}  // namespace
}  // namespace strata
