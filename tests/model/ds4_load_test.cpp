// Bad deepseek4 files fail at load with an error naming the tensor / key and expected vs
// actual: a missing tensor, a wrong shape, inconsistent compress_ratios, bad tid2eid ids.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/fixtures.h"
#include "format/gguf.h"
#include "model/deepseek4/ds4_arch.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

// Rewrites `src` with metadata edits and tensor edits; returns the load error ("" = loaded).
std::string load_modified(const GgufFile& src, const std::function<void(GgufWriter&)>& meta,
                          const std::function<bool(const TensorView&, std::vector<int64_t>&)>& keep) {
  GgufWriter w;
  for (const auto& kv : src.metadata())
    if (kv.key != "general.alignment") w.set_value(kv.key, kv.value);
  meta(w);
  for (const auto& t : src.tensors()) {
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    if (!keep(t, ne)) continue;
    EXPECT_TRUE(w.add_tensor(t.name, t.type, ne, t.data).ok()) << t.name;
  }
  const fs::path p = fs::temp_directory_path() / ("ds4_load_" + std::to_string(getpid()) + ".gguf");
  EXPECT_TRUE(w.write(p.string()).ok());
  auto f = GgufFile::open(p.string());
  if (!f.ok()) return "open: " + f.message();
  auto a = make_arch_deepseek4(**f);
  fs::remove(p);
  return a.ok() ? "" : a.message();
}

class Ds4Load : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = testing::fixtures_dir();
    if (!dir) GTEST_SKIP() << "fixtures not found";
    auto f = GgufFile::open(*dir + "/models/tiny-deepseek4-f32.gguf");
    ASSERT_TRUE(f.ok()) << f.message();
    file_ = std::move(f).value();
  }
  std::unique_ptr<GgufFile> file_;
};

auto no_meta = [](GgufWriter&) {};
auto keep_all = [](const TensorView&, std::vector<int64_t>&) { return true; };

TEST_F(Ds4Load, UnmodifiedCopyLoads) {
  EXPECT_EQ(load_modified(*file_, no_meta, keep_all), "");
}

TEST_F(Ds4Load, MissingTensorIsNamed) {
  const std::string e = load_modified(*file_, no_meta, [](const TensorView& t, std::vector<int64_t>&) {
    return t.name != "blk.2.indexer_compressor_ape.weight";
  });
  EXPECT_NE(e.find("blk.2.indexer_compressor_ape.weight"), std::string::npos) << e;
}

TEST_F(Ds4Load, WrongShapeSaysExpectedAndActual) {
  // a sink vector of 4 values where the model has 8 heads
  const std::string e = load_modified(*file_, no_meta, [](const TensorView& t, std::vector<int64_t>& ne) {
    if (t.name == "blk.1.attn_sinks.weight") ne = {4};
    return true;
  });
  EXPECT_NE(e.find("blk.1.attn_sinks.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("[8]"), std::string::npos) << e;
  EXPECT_NE(e.find("[4]"), std::string::npos) << e;
  // layer 3 claims ratio 4 but carries ratio-128 compressor tensors
  const std::string e2 = load_modified(
      *file_,
      [&](GgufWriter& w) {
        w.set_array_u32("deepseek4.attention.compress_ratios", {0, 0, 4, 4, 4, 128});
      },
      keep_all);
  EXPECT_NE(e2.find("blk.3."), std::string::npos) << e2;
  EXPECT_NE(e2.find("expected"), std::string::npos) << e2;
}

TEST_F(Ds4Load, InconsistentCompressRatiosNameTheKey) {
  std::string e = load_modified(
      *file_,
      [](GgufWriter& w) {
        w.set_array_u32("deepseek4.attention.compress_ratios", {0, 0, 4, 128});
      },
      keep_all);
  EXPECT_NE(e.find("deepseek4.attention.compress_ratios"), std::string::npos) << e;
  EXPECT_NE(e.find("expected >= 6"), std::string::npos) << e;
  e = load_modified(
      *file_,
      [](GgufWriter& w) {
        w.set_array_u32("deepseek4.attention.compress_ratios", {0, 0, 4, 64, 4, 128});
      },
      keep_all);
  EXPECT_NE(e.find("compress_ratios'[3] = 64"), std::string::npos) << e;
  e = load_modified(
      *file_, [](GgufWriter& w) { w.set_u32("deepseek4.expert_gating_func", 1); }, keep_all);
  EXPECT_NE(e.find("expert_gating_func"), std::string::npos) << e;
  e = load_modified(
      *file_, [](GgufWriter& w) { w.set_u32("deepseek4.hyper_connection.count", 2); }, keep_all);
  EXPECT_NE(e.find("hyper_connection.count"), std::string::npos) << e;
}

}  // namespace
}  // namespace strata
