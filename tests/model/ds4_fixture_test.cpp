// deepseek4 oracle tests: the tiny DeepSeek-V4 fixtures (f32 and MXFP4 experts + Q8_0 dense;
// short16 and long320, which crosses the 128-token window, two HCA blocks and 80 CSA blocks >
// indexer top-k) in batch mode (one forward of all tokens) and incremental mode (one forward per
// token, exercising the window ring and the compressors' rolling state), with the fixture's
// pass criteria (fixtures README §4). The arch is built with make_arch_deepseek4 directly, so
// the test does not depend on the registry entry.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "common/fixtures.h"
#include "kernels/cpu_device.h"
#include "model/arch_chunks.h"
#include "model/deepseek4/ds4_arch.h"
#include "model/fixture_metrics.h"

namespace strata {
namespace {

using testing::Criteria;
using testing::FixtureMeta;
using testing::FixtureMetrics;

struct Ds4Case {
  const char* fixture;
  const char* criteria;
};

const Ds4Case kDs4Cases[] = {
    {"tiny-deepseek4-f32__short16", ""},
    {"tiny-deepseek4-f32__long320", ""},
    {"tiny-deepseek4-MXFP4_MOE__short16", "faithful"},
    {"tiny-deepseek4-MXFP4_MOE__long320", "faithful"},
};

struct Loaded {
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<CpuDevice> dev;  // before arch: it frees its imports on it
  std::unique_ptr<Architecture> arch;
};

Loaded* load(const std::string& path) {
  static std::map<std::string, Loaded> cache;
  auto it = cache.find(path);
  if (it != cache.end()) return &it->second;
  auto f = GgufFile::open(path);
  if (!f.ok()) {
    ADD_FAILURE() << f.message();
    return nullptr;
  }
  Loaded l;
  l.file = std::move(f).value();
  auto a = make_arch_deepseek4(*l.file);
  if (!a.ok()) {
    ADD_FAILURE() << a.message();
    return nullptr;
  }
  l.arch = std::move(a).value();
  l.pool = std::make_unique<ThreadPool>(2);
  l.dev = std::make_unique<CpuDevice>(*l.pool);
  if (Status s = l.arch->place(*l.dev); !s.ok()) {
    ADD_FAILURE() << s.message();
    return nullptr;
  }
  return &cache.emplace(path, std::move(l)).first->second;
}

// Evaluates the sequence in chunks of `chunk` tokens (n: one batch; 1: token by token).
std::vector<float> run(const Architecture& arch, const std::vector<int32_t>& tokens, int chunk) {
  ThreadPool pool(2);
  return testing::forward_chunks(arch, tokens, chunk, pool);
}

enum Mode { kBatch, kIncremental, kChunks37 };
const char* mode_name(int m) {
  return m == kBatch ? "batch" : m == kIncremental ? "incremental" : "chunks37";
}

class Ds4Fixture : public ::testing::TestWithParam<std::tuple<Ds4Case, int>> {};

TEST_P(Ds4Fixture, MatchesLlamaCpp) {
  STRATA_REQUIRE_FIXTURES(dir);
  const Ds4Case c = std::get<0>(GetParam());
  const int mode = std::get<1>(GetParam());
  FixtureMeta m;
  std::string msg;
  ASSERT_TRUE(testing::load_fixture(dir, c.fixture, &m, &msg)) << msg;
  Loaded* l = load(m.model_path);
  ASSERT_NE(l, nullptr);
  ASSERT_EQ(l->arch->hparams().n_vocab, m.n_vocab);
  const int chunk = mode == kBatch ? m.n_tokens : mode == kIncremental ? 1 : 37;
  const std::vector<float> eng = run(*l->arch, m.tokens, chunk);
  const Criteria crit = testing::fixture_criteria(m, c.criteria);
  const FixtureMetrics r = testing::fixture_metrics(m, eng, crit.tie_below);
  std::printf("[fixture] %-36s %-11s %-9s %s\n", c.fixture, mode_name(mode), crit.name.c_str(),
              testing::metrics_string(r).c_str());
  // STRATA_DUMP_LOGITS=DIR writes the logits for tools/check_fixture.py
  if (const char* dump = std::getenv("STRATA_DUMP_LOGITS"); dump && *dump) {
    const std::string path = std::string(dump) + "/" + c.fixture + "." + mode_name(mode) + ".f32";
    if (FILE* f = std::fopen(path.c_str(), "wb")) {
      std::fwrite(eng.data(), sizeof(float), eng.size(), f);
      std::fclose(f);
    }
  }
  const std::string fail = testing::fixture_check(r, crit);
  EXPECT_TRUE(fail.empty()) << c.fixture << " (" << crit.name << "): " << fail;
}

// The decode-time state (window ring, compressor rolling state, compressed rows) must make
// token-by-token and chunked evaluation reproduce the one-batch logits bit for bit.
TEST(Ds4FixtureState, IncrementalAndChunkedEqualBatchExactly) {
  STRATA_REQUIRE_FIXTURES(dir);
  FixtureMeta m;
  std::string msg;
  ASSERT_TRUE(testing::load_fixture(dir, "tiny-deepseek4-f32__long320", &m, &msg)) << msg;
  Loaded* l = load(m.model_path);
  ASSERT_NE(l, nullptr);
  const std::vector<float> batch = run(*l->arch, m.tokens, m.n_tokens);
  for (int chunk : {1, 5, 128}) {
    const std::vector<float> other = run(*l->arch, m.tokens, chunk);
    size_t first_diff = batch.size();
    for (size_t i = 0; i < batch.size(); ++i)
      if (batch[i] != other[i]) {
        first_diff = i;
        break;
      }
    EXPECT_EQ(first_diff, batch.size())
        << "chunk " << chunk << ": first difference at position " << first_diff / m.n_vocab;
  }
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<Ds4Case, int>>& info) {
  std::string s = std::get<0>(info.param).fixture;
  for (char& ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s + "_" + mode_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(All, Ds4Fixture,
                         ::testing::Combine(::testing::ValuesIn(kDs4Cases),
                                            ::testing::Values(kBatch, kIncremental, kChunks37)),
                         case_name);

}  // namespace
}  // namespace strata
