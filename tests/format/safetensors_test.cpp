// safetensors reader and checkpoint-directory validation: every malformed input is an error
// naming the file and tensor, never a crash. The writer: files and sharded directories the reader
// takes back byte for byte; its errors name the file and tensor.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "format/safetensors.h"
#include "format/safetensors_dir.h"
#include "format/safetensors_writer.h"

namespace strata {
namespace {

std::string image(const std::string& header, size_t data_bytes) {
  std::string s(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s + header + std::string(data_bytes, '\x01');
}

Result<std::unique_ptr<SafetensorsFile>> parse(const std::string& img) {
  return SafetensorsFile::from_memory(img.data(), img.size(), "t.safetensors");
}

TEST(Safetensors, ParsesTensorsAndMetadata) {
  const std::string img = image(
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},)"
      R"("b":{"dtype":"F32","shape":[],"data_offsets":[12,16]},"e":{"dtype":"F8_E4M3","shape":[0],"data_offsets":[16,16]}})",
      16);
  auto f = parse(img);
  ASSERT_TRUE(f.ok()) << f.message();
  ASSERT_EQ(f.value()->tensors().size(), 3u);
  const StTensor* a = f.value()->find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, StDtype::bf16);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->nbytes, 12u);
  EXPECT_EQ(a->shape_string(), "BF16 [2, 3]");
  EXPECT_EQ(f.value()->find("b")->numel(), 1);
  EXPECT_EQ(f.value()->metadata().at("format"), "pt");
  EXPECT_EQ(f.value()->find("zz"), nullptr);
}

void expect_error(const std::string& img, const std::string& needle) {
  auto f = parse(img);
  ASSERT_FALSE(f.ok()) << "accepted: " << needle;
  EXPECT_NE(f.message().find(needle), std::string::npos) << f.message();
  EXPECT_NE(f.message().find("t.safetensors"), std::string::npos) << f.message();
}

TEST(Safetensors, RejectsBadInput) {
  std::string short_img = "abc";
  EXPECT_FALSE(SafetensorsFile::from_memory(short_img.data(), short_img.size(), "t.safetensors").ok());
  std::string huge = image("{}", 0);
  huge[0] = '\x7f';
  expect_error(huge, "header length");
  expect_error(image("{\"a\":", 0), "not valid JSON");
  expect_error(image("[1,2]", 0), "not a JSON object");
  expect_error(image(R"({"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", 1), "unknown dtype 'Q4'");
  expect_error(image(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4), "non-negative");
  expect_error(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 8), "needs 8 bytes");
  expect_error(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4), "past the data region");
  expect_error(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4), "begin after end");
  expect_error(
      image(
          R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
          8),
      "overlap");
  expect_error(
      image(
          R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
          8),
      "appears twice");
  expect_error(image(R"({"a":{"dtype":"F32","shape":[1]}})", 4), "data_offsets");
  expect_error(image(R"({"a":5})", 0), "not an object");
}

class StDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("st_dir_test_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
  }
  std::filesystem::path dir_;
};

TEST_F(StDir, ShardsWithIndex) {
  write("s1.safetensors", image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4));
  write("s2.safetensors", image(R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4));
  write("model.safetensors.index.json", R"({"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}})");
  auto d = SafetensorsDir::open(dir_.string());
  ASSERT_TRUE(d.ok()) << d.message();
  EXPECT_EQ(d.value()->n_tensors(), 2u);
  EXPECT_EQ(d.value()->file_of("b"), "s2.safetensors");
  ASSERT_NE(d.value()->find("a"), nullptr);
}

TEST_F(StDir, MissingShardNamesFileAndTensor) {
  write("s1.safetensors", image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4));
  write("model.safetensors.index.json", R"({"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}})");
  auto d = SafetensorsDir::open(dir_.string());
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.message().find("shard 's2.safetensors' is missing"), std::string::npos) << d.message();
  EXPECT_NE(d.message().find("'b'"), std::string::npos) << d.message();
}

TEST_F(StDir, IndexedTensorAbsentAndDuplicates) {
  write("s1.safetensors", image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4));
  write("model.safetensors.index.json", R"({"weight_map":{"a":"s1.safetensors","c":"s1.safetensors"}})");
  auto d = SafetensorsDir::open(dir_.string());
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.message().find("'c'"), std::string::npos) << d.message();
  std::filesystem::remove(dir_ / "model.safetensors.index.json");
  write("s2.safetensors", image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4));
  auto d2 = SafetensorsDir::open(dir_.string());
  ASSERT_FALSE(d2.ok());
  EXPECT_NE(d2.message().find("in two shards"), std::string::npos) << d2.message();
}

TEST_F(StDir, EmptyDirectory) {
  auto d = SafetensorsDir::open(dir_.string());
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.message().find("no *.safetensors"), std::string::npos) << d.message();
}

std::vector<uint8_t> counting(size_t n, uint8_t start) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(start + i * 7);
  return v;
}

TEST_F(StDir, WriterRoundTripsShardsAndIndex) {
  std::vector<StTensorOut> ts = {st_tensor_bytes("a.weight", StDtype::bf16, {3, 5}, counting(30, 1)),
                                 st_tensor_bytes("a.scale", StDtype::f8_e8m0, {1, 1}, {127}),
                                 st_tensor_bytes("b", StDtype::f32, {4}, counting(16, 9)),
                                 st_tensor_bytes("c.weight", StDtype::i8, {2, 40}, counting(80, 3))};
  // Shards of at most 40 bytes of data: [a.weight, a.scale], [b], [c.weight] (alone, larger).
  std::filesystem::create_directories(dir_ / "ck");
  write("ck/model-00001-of-00009.safetensors", "stale");  // a previous write's shard: removed
  auto w = write_safetensors_dir((dir_ / "ck").string(), ts, 40);
  ASSERT_TRUE(w.ok()) << w.message();
  EXPECT_EQ(w->n_shards, 3);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "ck" / "model-00001-of-00009.safetensors"));
  auto d = SafetensorsDir::open((dir_ / "ck").string());
  ASSERT_TRUE(d.ok()) << d.message();
  EXPECT_TRUE(d.value()->has_index());
  EXPECT_EQ(d.value()->n_tensors(), 4u);
  EXPECT_EQ(d.value()->file_of("a.scale"), "model-00001-of-00003.safetensors");
  EXPECT_EQ(d.value()->file_of("c.weight"), "model-00003-of-00003.safetensors");
  EXPECT_EQ(w->bytes, d.value()->total_bytes());
  for (const auto& [name, n, start] : {std::tuple{"a.weight", 30, 1}, {"b", 16, 9}, {"c.weight", 80, 3}}) {
    const StTensor* t = d.value()->find(name);
    ASSERT_NE(t, nullptr) << name;
    ASSERT_EQ(t->nbytes, static_cast<size_t>(n));
    EXPECT_EQ(std::memcmp(t->data, counting(n, static_cast<uint8_t>(start)).data(), n), 0) << name;
    EXPECT_EQ(t->offset % 8, 0u) << "the first tensor of a shard starts 8-byte aligned";
  }
  EXPECT_EQ(d.value()->find("c.weight")->shape_string(), "I8 [2, 40]");
  // One shard: model.safetensors, no index (the old index removed).
  ASSERT_TRUE(write_safetensors_dir((dir_ / "ck").string(), ts, 1 << 20).ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ / "ck" / "model.safetensors.index.json"));
  auto d1 = SafetensorsDir::open((dir_ / "ck").string());
  ASSERT_TRUE(d1.ok()) << d1.message();
  EXPECT_EQ(d1.value()->shards().size(), 1u);
}

TEST_F(StDir, WriterErrorsNameFileAndTensor) {
  const std::string p = (dir_ / "x.safetensors").string();
  std::vector<StTensorOut> dup = {st_tensor_bytes("a", StDtype::f32, {1}, counting(4, 0)),
                                  st_tensor_bytes("a", StDtype::f32, {1}, counting(4, 0))};
  auto r = write_safetensors(p, dup);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("'a' appears twice"), std::string::npos) << r.message();
  std::vector<StTensorOut> failing = {
      {"w", StDtype::f32, {2}, [](uint8_t*, size_t, size_t) -> Status { return err("no bytes today"); }}};
  r = write_safetensors(p, failing);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("x.safetensors: tensor 'w': no bytes today"), std::string::npos) << r.message();
  dup.pop_back();
  r = write_safetensors((dir_ / "no" / "such" / "x.safetensors").string(), dup);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("cannot create"), std::string::npos) << r.message();
}

}  // namespace
}  // namespace strata
