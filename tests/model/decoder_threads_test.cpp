// The decoder's pool regions do not change a bit of the result: logits with 2 and 3 threads equal
// those with 1 thread (everything inline), for a prompt in one batch and then token by token, on
// synth models big enough that every block runs on the pool (attention block, MoE phases,
// shared expert, dense FFN, output), in each decode-kernel type.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <string>
#include <unistd.h>
#include <vector>

#include "model/model.h"
#include "model/synth.h"

namespace strata {
namespace {

struct Case {
  const char* arch;
  const char* type;
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.arch << " " << c.type;
}

std::string synth_model(const Case& c) {
  SynthSpec s;
  s.arch = c.arch;
  s.n_layer = 2;
  s.n_embd = 512;  // q/k/v of one token ≈ 0.5M multiply-adds: above the pool threshold
  s.n_head = 8;
  s.n_head_kv = 2;
  s.n_vocab = 1024;
  s.type = c.type;
  s.seed = 7;
  if (std::string(c.arch) == "llama") {
    s.ffn = 512;
  } else {
    s.n_expert = 8;
    s.n_expert_used = 3;
    s.expert_ffn = 256;
  }
  s.n_threads = 2;
  const std::string path =
      (std::filesystem::temp_directory_path() /
       ("strata_threads_" + std::string(c.arch) + "_" + c.type + "_" + std::to_string(::getpid()) + ".gguf"))
          .string();
  auto r = synth_write(s, path);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.message());
  return path;
}

// All logits of a 21-token prompt in one batch, then 6 tokens one by one after it.
std::vector<float> run(const std::string& path, int threads) {
  auto m = Model::load(path, {.n_threads = threads});
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.message());
  if (!m.ok()) return {};
  const int n_vocab = (*m)->n_vocab();
  std::vector<int32_t> prompt;
  for (int i = 0; i < 21; ++i) prompt.push_back((i * 37 + 5) % n_vocab);
  const int n_gen = 6;
  std::vector<float> out(static_cast<size_t>(prompt.size() + n_gen) * n_vocab);
  auto s = (*m)->new_session({.n_ctx = 64});
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.message());
  if (!s.ok()) return {};
  EXPECT_TRUE((*s)->eval(prompt, out.data(), true).ok());
  for (int i = 0; i < n_gen; ++i) {
    const int32_t t = (i * 101 + 3) % n_vocab;
    EXPECT_TRUE((*s)->eval({&t, 1}, out.data() + (prompt.size() + i) * n_vocab, false).ok());
  }
  return out;
}

class DecoderThreads : public ::testing::TestWithParam<Case> {};

TEST_P(DecoderThreads, LogitsIndependentOfThreadCount) {
  const std::string path = synth_model(GetParam());
  const std::vector<float> one = run(path, 1);
  ASSERT_FALSE(one.empty());
  for (int threads : {2, 3}) {
    const std::vector<float> many = run(path, threads);
    ASSERT_EQ(many.size(), one.size());
    size_t first = one.size();
    for (size_t i = 0; i < one.size() && first == one.size(); ++i)
      if (std::memcmp(&one[i], &many[i], sizeof(float)) != 0) first = i;
    EXPECT_EQ(first, one.size()) << threads << " threads: logit " << first << " is " << many[first]
                                 << ", 1 thread gives " << one[first];
  }
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Synth, DecoderThreads,
                         ::testing::Values(Case{"qwen3moe", "f16"}, Case{"qwen3moe", "q8_0"},
                                           Case{"qwen3moe", "q4_0"}, Case{"qwen3moe", "mxfp4"},
                                           Case{"qwen2moe", "q8_0"}, Case{"llama", "f16"}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return std::string(i.param.arch) + "_" + i.param.type;
                         });

}  // namespace
}  // namespace strata
