// The llama.cpp fixture pass criteria in C++ (same math as shared/fixtures/tools/check_fixture.py):
// max |Δlogit|, KL(softmax(ref) ‖ softmax(engine)) per position (max and mean, nats), argmax
// agreement over positions whose reference top-1/top-2 gap is >= the near-tie threshold.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace strata::testing {

struct FixtureMeta {
  std::string name;        // "tiny-qwen3moe-f32__short16"
  std::string model_path;  // absolute
  std::string pass_class;  // "f32", "quant", ...
  int n_tokens = 0;
  int n_vocab = 0;
  std::vector<int32_t> tokens;
  nlohmann::json recommended;  // recommended_pass (whole object)
  std::vector<float> ref;      // [n_tokens][n_vocab]
};

struct FixtureMetrics {
  double max_abs = 0, kl_max = 0, kl_mean = 0, argmax_agree = 1;
  int worst_pos = 0;
};

struct Criteria {
  std::string name;  // "f32", "faithful", "f32_activations"
  double max_abs = -1, kl_max = -1, kl_mean = -1, argmax_min = 0, tie_below = 0;
};

// Loads <dir>/logits/<name>.json and .f32; false + message on failure.
bool load_fixture(const std::string& dir, const std::string& name, FixtureMeta* out, std::string* msg);
FixtureMetrics fixture_metrics(const FixtureMeta& m, const std::vector<float>& eng, double tie_below);
// The thresholds for `criteria` ("faithful" / "f32_activations"; ignored for the f32 class).
Criteria fixture_criteria(const FixtureMeta& m, const std::string& criteria);
// Empty string = pass; else the failed checks.
std::string fixture_check(const FixtureMetrics& r, const Criteria& c);
std::string metrics_string(const FixtureMetrics& r);

}  // namespace strata::testing
