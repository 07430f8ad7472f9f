// `strata quantize` against llama-quantize itself: the shared fixtures' quantized models were
// written by llama-quantize v0.5.0 from the f32 models beside them (fixtures README §2). Quantizing
// the same f32 source with the same file type and overrides, strata must give every tensor the
// same type, shape and bytes, in the same order; only strata's own metadata keys may differ.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/fixtures.h"
#include "format/gguf.h"
#include "quantize/quantize_gguf.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

struct Case {
  const char* src;                        // f32 fixture
  const char* ftype;                      // llama-quantize's type name
  const char* want;                       // llama-quantize's output in the fixtures
  std::vector<const char*> tensor_types;  // --tensor-type REGEX=TYPE
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string s = std::string(info.param.want);
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

class QuantizeLikeLlamaCpp : public ::testing::TestWithParam<Case> {};

TEST_P(QuantizeLikeLlamaCpp, EveryTensorHasTheSameTypeAndBytes) {
  STRATA_REQUIRE_FIXTURES(fx);
  const Case& c = GetParam();
  auto src = GgufFile::open(fx + "/models/" + c.src);
  ASSERT_TRUE(src.ok()) << src.message();
  auto want = GgufFile::open(fx + "/models/" + c.want);
  ASSERT_TRUE(want.ok()) << want.message();

  QuantizeOptions o;
  o.policy.ftype = quant_ftype(c.ftype);
  ASSERT_NE(o.policy.ftype, nullptr) << c.ftype;
  for (const char* spec : c.tensor_types) {
    auto rule = parse_tensor_type_rule(spec);
    ASSERT_TRUE(rule.ok()) << rule.message();
    o.policy.tensor_types.push_back(*rule);
  }
  o.n_threads = 2;
  auto plan = plan_quantize(**src, o);
  ASSERT_TRUE(plan.ok()) << plan.message();
  const fs::path out = fs::temp_directory_path() / ("strata_qfix_" + std::to_string(getpid()) + "_" + c.want);
  ASSERT_TRUE(write_quantized(**src, *plan, o, out.string()).ok());
  auto got = GgufFile::open(out.string());
  ASSERT_TRUE(got.ok()) << got.message();

  const auto& gt = (*got)->tensors();
  const auto& wt = (*want)->tensors();
  ASSERT_EQ(gt.size(), wt.size());
  int differing = 0;
  for (size_t i = 0; i < wt.size(); ++i) {
    const TensorView& g = gt[i];
    const TensorView& w = wt[i];
    EXPECT_EQ(g.name, w.name) << "tensor " << i << " (llama-quantize's order)";
    EXPECT_EQ(type_name(g.type), type_name(w.type)) << w.name;
    for (int d = 0; d < kMaxDims; ++d) EXPECT_EQ(g.ne[d], w.ne[d]) << w.name;
    if (g.type != w.type || g.nbytes != w.nbytes) continue;
    if (std::memcmp(g.data, w.data, w.nbytes) != 0) {
      ++differing;
      ADD_FAILURE() << w.name << " (" << type_name(w.type) << "): bytes differ from llama-quantize's";
    }
  }
  EXPECT_EQ(differing, 0);
  EXPECT_EQ((*got)->get_int("general.file_type").value(), (*want)->get_int("general.file_type").value());
  fs::remove(out);
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, QuantizeLikeLlamaCpp,
    ::testing::Values(Case{"tiny-qwen3moe-f32.gguf", "Q8_0", "tiny-qwen3moe-Q8_0.gguf", {}},
                      Case{"tiny-qwen3moe-f32.gguf", "Q4_0", "tiny-qwen3moe-Q4_0.gguf", {}},
                      Case{"tiny-llama-moe-f32.gguf", "Q8_0", "tiny-llama-moe-Q8_0.gguf", {}},
                      Case{"tiny-llama-moe-f32.gguf", "Q4_0", "tiny-llama-moe-Q4_0.gguf", {}},
                      Case{"tiny-qwen2moe-f32.gguf", "Q8_0", "tiny-qwen2moe-Q8_0.gguf", {}},
                      Case{"tiny-gpt-oss-f32.gguf", "MXFP4_MOE", "tiny-gpt-oss-MXFP4_MOE.gguf", {}},
                      Case{"tiny-deepseek4-f32.gguf",
                           "MXFP4_MOE",
                           "tiny-deepseek4-MXFP4_MOE.gguf",
                           {"hc_=f32", "_ape=f32"}}),
    case_name);

}  // namespace
}  // namespace strata
