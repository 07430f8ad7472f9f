// Oracle tests: every llama.cpp fixture of the standard architectures (qwen3moe, llama MoE,
// qwen2moe, gpt-oss; f32 and quantized; short and long sequences), evaluated in batch mode
// (one eval of all tokens) and incremental mode (one eval per token), checked with the
// fixture's own pass criteria (fixtures README §4).
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/fixtures.h"
#include "model/fixture_metrics.h"
#include "model/model.h"

namespace strata {
namespace {

using testing::Criteria;
using testing::FixtureMeta;
using testing::FixtureMetrics;

struct Case {
  const char* fixture;
  const char* criteria;  // for quantized fixtures: the criteria strata is held to
};

// Quantized fixtures are held to `faithful` (strata quantizes matmul activations like ggml-cpu).
const Case kCases[] = {
    {"tiny-qwen3moe-f32__short16", ""},
    {"tiny-qwen3moe-f32__long128", ""},
    {"tiny-qwen3moe-Q8_0__short16", "faithful"},
    {"tiny-qwen3moe-Q8_0__long128", "faithful"},
    {"tiny-qwen3moe-Q4_0__short16", "faithful"},
    {"tiny-qwen3moe-Q4_0__long128", "faithful"},
    {"tiny-llama-moe-f32__short16", ""},
    {"tiny-llama-moe-f32__long128", ""},
    {"tiny-llama-moe-Q8_0__short16", "faithful"},
    {"tiny-llama-moe-Q8_0__long128", "faithful"},
    {"tiny-llama-moe-Q4_0__short16", "faithful"},
    {"tiny-llama-moe-Q4_0__long128", "faithful"},
    {"tiny-qwen2moe-f32__short16", ""},
    {"tiny-qwen2moe-f32__long128", ""},
    {"tiny-qwen2moe-Q8_0__short16", "faithful"},
    {"tiny-qwen2moe-Q8_0__long128", "faithful"},
    {"tiny-gpt-oss-f32__short16", ""},
    {"tiny-gpt-oss-f32__long320", ""},
    {"tiny-gpt-oss-MXFP4__short16", "faithful"},
    {"tiny-gpt-oss-MXFP4__long320", "faithful"},
    {"tiny-gpt-oss-MXFP4_MOE__short16", "faithful"},
    {"tiny-gpt-oss-MXFP4_MOE__long320", "faithful"},
};

// Models are shared between the cases of one file (loading is cheap, but keep tests quick).
Model* cached_model(const std::string& path) {
  static std::map<std::string, std::unique_ptr<Model>> cache;
  auto it = cache.find(path);
  if (it != cache.end()) return it->second.get();
  LoadOptions lo;
  lo.n_threads = 2;
  auto m = Model::load(path, lo);
  if (!m.ok()) {
    ADD_FAILURE() << m.message();
    return nullptr;
  }
  return cache.emplace(path, std::move(m).value()).first->second.get();
}

std::vector<float> run(Model& model, const std::vector<int32_t>& tokens, bool incremental) {
  const int V = model.n_vocab();
  std::vector<float> out(tokens.size() * V);
  SessionOptions so;
  so.n_ctx = std::max<int>(16, static_cast<int>(tokens.size()));
  auto sess = model.new_session(so);
  EXPECT_TRUE(sess.ok()) << sess.message();
  if (!sess.ok()) return out;
  if (!incremental) {
    Status s = sess.value()->eval(tokens, out.data(), true);
    EXPECT_TRUE(s.ok()) << s.message();
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) {
      Status s = sess.value()->eval(std::span<const int32_t>(&tokens[i], 1), out.data() + i * V, false);
      EXPECT_TRUE(s.ok()) << s.message();
      if (!s.ok()) break;
    }
  }
  return out;
}

class FixtureLogits : public ::testing::TestWithParam<std::tuple<Case, bool>> {};

TEST_P(FixtureLogits, MatchesLlamaCpp) {
  STRATA_REQUIRE_FIXTURES(dir);
  const Case c = std::get<0>(GetParam());
  const bool incremental = std::get<1>(GetParam());
  FixtureMeta m;
  std::string msg;
  ASSERT_TRUE(testing::load_fixture(dir, c.fixture, &m, &msg)) << msg;
  Model* model = cached_model(m.model_path);
  ASSERT_NE(model, nullptr);
  ASSERT_EQ(model->n_vocab(), m.n_vocab);
  const std::vector<float> eng = run(*model, m.tokens, incremental);
  const Criteria crit = testing::fixture_criteria(m, c.criteria);
  const FixtureMetrics r = testing::fixture_metrics(m, eng, crit.tie_below);
  std::printf("[fixture] %-34s %-11s %-9s %s\n", c.fixture, incremental ? "incremental" : "batch",
              crit.name.c_str(), testing::metrics_string(r).c_str());
  if (m.pass_class != "f32") {  // also show the other criterion's verdict, for the report
    const std::string other = std::string(c.criteria) == "faithful" ? "f32_activations" : "faithful";
    const std::string f = testing::fixture_check(r, testing::fixture_criteria(m, other));
    std::printf("[fixture]   (%s: %s)\n", other.c_str(), f.empty() ? "pass" : f.c_str());
  }
  const std::string fail = testing::fixture_check(r, crit);
  EXPECT_TRUE(fail.empty()) << c.fixture << " (" << crit.name << "): " << fail;
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<Case, bool>>& info) {
  std::string s = std::get<0>(info.param).fixture;
  for (char& ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s + (std::get<1>(info.param) ? "_incremental" : "_batch");
}

INSTANTIATE_TEST_SUITE_P(All, FixtureLogits,
                         ::testing::Combine(::testing::ValuesIn(kCases), ::testing::Bool()), case_name);

}  // namespace
}  // namespace strata
