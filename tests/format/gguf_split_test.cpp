// Split GGUF models (llama.cpp's gguf-split layout): gguf_write_split of the bundled model, then
// GgufFile::open of the first shard lists every tensor with the same bytes as the unsplit file;
// and the errors: a later shard opened, a missing shard, a shard of another split, a wrong total.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "common/fixtures.h"
#include "format/gguf.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

class GgufSplit : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("strata_split_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto f = GgufFile::open(testing::source_dir() + "/tests/data/bundled_smoke.gguf");
    ASSERT_TRUE(f.ok()) << f.message();
    src_ = std::move(f).value();
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string prefix(const char* name) const { return (dir_ / name).string(); }

  fs::path dir_;
  std::unique_ptr<GgufFile> src_;
};

TEST_F(GgufSplit, ShardsJoinToTheSameTensors) {
  const size_t n = src_->tensors().size();
  ASSERT_GT(n, 4u);
  auto paths = gguf_write_split(*src_, prefix("m"), GgufSplitOptions{.max_tensors = 4});
  ASSERT_TRUE(paths.ok()) << paths.message();
  const int n_shards = static_cast<int>((n + 3) / 4);
  ASSERT_EQ(static_cast<int>(paths->size()), n_shards);
  EXPECT_EQ(paths->front(), prefix("m") + "-00001-of-" + (n_shards < 10 ? "0000" : "000") +
                                std::to_string(n_shards) + ".gguf");
  auto f = GgufFile::open(paths->front());
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ((*f)->n_shards(), n_shards);
  ASSERT_EQ((*f)->tensors().size(), n);
  for (const TensorView& want : src_->tensors()) {
    const TensorView* got = (*f)->find_tensor(want.name);
    ASSERT_NE(got, nullptr) << want.name;
    EXPECT_EQ(got->type, want.type);
    EXPECT_EQ(got->shape_string(), want.shape_string());
    ASSERT_EQ(got->nbytes, want.nbytes);
    EXPECT_EQ(std::memcmp(got->data, want.data, want.nbytes), 0) << want.name;
  }
  for (const GgufKv& kv : src_->metadata()) {
    const GgufValue* v = (*f)->find(kv.key);
    ASSERT_NE(v, nullptr) << kv.key;
    EXPECT_TRUE(gguf_value_equal(*v, kv.value)) << kv.key;
  }
  // By size: every shard but the last holds at most max_bytes (one tensor at least).
  auto by_size = gguf_write_split(*src_, prefix("s"), GgufSplitOptions{.max_bytes = 64 << 10});
  ASSERT_TRUE(by_size.ok()) << by_size.message();
  EXPECT_GT(by_size->size(), 1u);
  auto g = GgufFile::open(by_size->front());
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ((*g)->tensors().size(), n);
  // One shard: a 00001-of-00001 file opens as itself.
  auto one = gguf_write_split(*src_, prefix("one"), {});
  ASSERT_TRUE(one.ok()) << one.message();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ(GgufFile::open(one->front()).value()->tensors().size(), n);
}

TEST_F(GgufSplit, BadShardsAreNamed) {
  auto paths = gguf_write_split(*src_, prefix("m"), GgufSplitOptions{.max_tensors = 4});
  ASSERT_TRUE(paths.ok()) << paths.message();
  ASSERT_GE(paths->size(), 3u);
  // A later shard is not a model on its own.
  auto later = GgufFile::open((*paths)[1]);
  ASSERT_FALSE(later.ok());
  EXPECT_NE(later.message().find("open the first shard, " + paths->front()), std::string::npos)
      << later.message();
  // A first shard renamed so that the others cannot be found from its name.
  const std::string odd = prefix("odd.gguf");
  fs::copy_file(paths->front(), odd);
  auto renamed = GgufFile::open(odd);
  ASSERT_FALSE(renamed.ok());
  EXPECT_NE(renamed.message().find("does not end in '-00001-of-"), std::string::npos) << renamed.message();
  // A shard of another split in place of shard 2 (same count, other split.no).
  fs::copy_file((*paths)[2], (*paths)[1], fs::copy_options::overwrite_existing);
  auto swapped = GgufFile::open(paths->front());
  ASSERT_FALSE(swapped.ok());
  EXPECT_NE(swapped.message().find((*paths)[1] + ": split.no = 2"), std::string::npos) << swapped.message();
  // A missing shard.
  fs::remove((*paths)[1]);
  auto missing = GgufFile::open(paths->front());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("shard 2 of"), std::string::npos) << missing.message();
  EXPECT_NE(missing.message().find((*paths)[1]), std::string::npos) << missing.message();
}

TEST_F(GgufSplit, TensorTotalMustMatch) {
  // Two shards written by hand: the first claims one tensor more than the two hold.
  const TensorView& t0 = src_->tensors()[0];
  const TensorView& t1 = src_->tensors()[1];
  for (int k = 0; k < 2; ++k) {
    GgufWriter w;
    w.set_value("split.no", gguf_make_int(GgufValueType::u16, k));
    w.set_value("split.count", gguf_make_int(GgufValueType::u16, 2));
    w.set_value("split.tensors.count", gguf_make_int(GgufValueType::i32, 3));
    const TensorView& t = k == 0 ? t0 : t1;
    ASSERT_TRUE(w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data).ok());
    ASSERT_TRUE(w.write(gguf_split_path(prefix("x"), k, 2)).ok());
  }
  auto f = GgufFile::open(gguf_split_path(prefix("x"), 0, 2));
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.message().find("split.tensors.count = 3, but the 2 shards hold 2 tensors"), std::string::npos)
      << f.message();
}

}  // namespace
}  // namespace strata
