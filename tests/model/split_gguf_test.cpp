// A split GGUF (llama.cpp's gguf-split layout, written by gguf_write_split) runs exactly like the
// unsplit file: the bundled model's logits for a prompt are equal bit for bit, and the expert
// store, which reads one file by offset, refuses a split model with a clear error.
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/fixtures.h"
#include "format/gguf.h"
#include "model/hparams.h"
#include "model/model.h"

namespace strata {
namespace {

std::vector<float> logits_of(const std::string& path, const std::vector<int32_t>& tokens) {
  auto m = Model::load(path, LoadOptions{.n_threads = 2});
  EXPECT_TRUE(m.ok()) << m.message();
  if (!m.ok()) return {};
  auto s = (*m)->new_session({.n_ctx = 64});
  EXPECT_TRUE(s.ok()) << s.message();
  if (!s.ok()) return {};
  std::vector<float> out(tokens.size() * static_cast<size_t>((*m)->n_vocab()));
  const Status st = (*s)->eval(tokens, out.data(), /*all_logits=*/true);
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

TEST(SplitGguf, LogitsEqualTheUnsplitFile) {
  const std::string src = testing::source_dir() + "/tests/data/bundled_smoke.gguf";
  const auto dir =
      std::filesystem::path(::testing::TempDir()) / ("strata_split_model_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto f = GgufFile::open(src);
  ASSERT_TRUE(f.ok()) << f.message();
  auto paths = gguf_write_split(**f, (dir / "smoke").string(), GgufSplitOptions{.max_tensors = 5});
  ASSERT_TRUE(paths.ok()) << paths.message();
  ASSERT_GT(paths->size(), 2u);
  const std::vector<int32_t> tokens = {1, 17, 42, 99, 7, 3, 250, 64, 12, 5};
  const std::vector<float> want = logits_of(src, tokens);
  const std::vector<float> got = logits_of(paths->front(), tokens);
  ASSERT_FALSE(want.empty());
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);

  LoadOptions budget{.n_threads = 2};
  budget.expert_stats = true;
  auto m = Model::load(paths->front(), budget);
  if (m.ok()) {
    EXPECT_EQ((*m)->hparams().n_expert, 0) << "a model with experts must refuse the store on a split file";
  } else {
    EXPECT_NE(m.message().find("split"), std::string::npos) << m.message();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace strata
