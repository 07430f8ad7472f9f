// One hand-built file per validation rule of the reader; each must fail with a message that
// names the problem (and where it is).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "format/gguf.h"
#include "format/gguf_bytes.h"

namespace strata {
namespace {

using ::strata::testing::GgufBytes;
constexpr uint32_t kF32 = 0, kQ8_0 = 8;

std::string parse_error(const GgufBytes& g) {
  // Copy into an exact-size heap buffer so ASan catches any read past the end.
  std::vector<uint8_t> buf(g.b);
  auto f = GgufFile::from_memory(buf.data(), buf.size(), "t.gguf");
  return f.ok() ? std::string("<parsed ok>") : f.message();
}

#define EXPECT_PARSE_ERROR(bytes, substr)                                             \
  do {                                                                                \
    const std::string msg_ = parse_error(bytes);                                      \
    EXPECT_NE(msg_.find(substr), std::string::npos) << "message: " << msg_;           \
    EXPECT_NE(msg_.find("gguf: t.gguf: "), std::string::npos) << "message: " << msg_; \
  } while (0)

// A valid file with one f32 tensor 't' of shape [4, 2] at offset 0.
GgufBytes one_tensor(const std::vector<int64_t>& ne = {4, 2}, uint32_t type = kF32, uint64_t offset = 0,
                     size_t data_bytes = 32) {
  GgufBytes g;
  g.header(1, 1).kv_str("general.architecture", "x").tensor("t", ne, type, offset).pad(32).zeros(data_bytes);
  return g;
}

TEST(GgufErrors, ValidBaselinesParse) {
  EXPECT_EQ(parse_error(one_tensor()), "<parsed ok>");
  GgufBytes v2;
  v2.header(0, 1, 2).kv_u32("a", 1);
  EXPECT_EQ(parse_error(v2), "<parsed ok>");
  // A vocab-only file ends right after the metadata: no data section, no padding needed.
  GgufBytes no_tensors;
  no_tensors.header(0, 0);
  EXPECT_EQ(parse_error(no_tensors), "<parsed ok>");
  // Zero-sized dimensions are allowed (llama.cpp allows them): an empty tensor.
  std::vector<uint8_t> buf = one_tensor({0, 2}, kF32, 0, 0).b;
  auto f = GgufFile::from_memory(buf.data(), buf.size());
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ((*f)->tensors()[0].nbytes, 0u);
  EXPECT_EQ((*f)->tensors()[0].n_elements(), 0);
}

TEST(GgufErrors, Header) {
  GgufBytes bad_magic = one_tensor();
  bad_magic.b[0] = 'X';
  EXPECT_PARSE_ERROR(bad_magic, "bad magic at offset 0");
  GgufBytes v1;
  v1.header(0, 0, 1);
  EXPECT_PARSE_ERROR(v1, "unsupported version 1 at offset 4");
  GgufBytes v4;
  v4.header(0, 0, 4);
  EXPECT_PARSE_ERROR(v4, "unsupported version 4");
  GgufBytes v0;
  v0.header(0, 0, 0);
  EXPECT_PARSE_ERROR(v0, "unsupported version 0");
  GgufBytes big_endian;
  big_endian.header(0, 0, 0x03000000);
  EXPECT_PARSE_ERROR(big_endian, "big-endian");
  GgufBytes empty;
  EXPECT_PARSE_ERROR(empty, "truncated: the magic needs 4 bytes at offset 0");
  GgufBytes short_hdr;
  short_hdr.header(0, 0);
  short_hdr.b.resize(13);
  EXPECT_PARSE_ERROR(short_hdr, "truncated: the tensor count needs 8 bytes at offset 8");
}

TEST(GgufErrors, CountsBeyondFile) {
  GgufBytes kv;
  kv.header(0, uint64_t{1} << 60);
  EXPECT_PARSE_ERROR(kv, "metadata count 1152921504606846976 at offset 16 is impossible");
  GgufBytes tn;
  tn.header(uint64_t{1} << 60, 0);
  EXPECT_PARSE_ERROR(tn, "tensor count 1152921504606846976 at offset 8 is impossible");
  GgufBytes arr;  // u32 array with 2^60 elements: must fail before allocating
  arr.header(0, 1).str("a").put<uint32_t>(9).put<uint32_t>(4).put<uint64_t>(uint64_t{1} << 60).zeros(16);
  EXPECT_PARSE_ERROR(arr, "key 'a': array at offset 37 has 1152921504606846976 elements of type u32");
  GgufBytes arr_str;  // strings need >= 8 bytes each
  arr_str.header(0, 1).str("a").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(3).zeros(16);
  EXPECT_PARSE_ERROR(arr_str, "3 elements of type string (at least 8 bytes each), but only 16 bytes remain");
}

TEST(GgufErrors, StringsBeyondFile) {
  GgufBytes key;
  key.header(0, 1).put<uint64_t>(uint64_t{1} << 60).zeros(8);
  EXPECT_PARSE_ERROR(key, "truncated: a metadata key at offset 24 has length 1152921504606846976");
  GgufBytes val;
  val.header(0, 1).str("k").put<uint32_t>(8).put<uint64_t>(100).zeros(10);
  EXPECT_PARSE_ERROR(val, "truncated: a string value at offset 37 has length 100, but only 10 bytes remain");
  GgufBytes name;
  name.header(1, 0).put<uint64_t>(~uint64_t{0}).zeros(40);
  EXPECT_PARSE_ERROR(name, "truncated: a tensor name at offset 24");
  GgufBytes cut = one_tensor();
  cut.b.resize(60);  // inside the first value
  EXPECT_PARSE_ERROR(cut, "truncated: a string value needs 8 bytes at offset 56, but the file ends at 60");
}

TEST(GgufErrors, MetadataValues) {
  GgufBytes bad_type;
  bad_type.header(0, 1).str("k").put<uint32_t>(13).put<uint32_t>(0);
  EXPECT_PARSE_ERROR(bad_type, "metadata key 'k': unknown value type 13 at offset 33");
  GgufBytes bad_elem;
  bad_elem.header(0, 1).str("k").put<uint32_t>(9).put<uint32_t>(77).put<uint64_t>(0);
  EXPECT_PARSE_ERROR(bad_elem, "key 'k': array at offset 37 has unknown element type 77");
  GgufBytes dup;
  dup.header(0, 2).kv_u32("a", 1).kv_u32("a", 2);
  EXPECT_PARSE_ERROR(dup, "duplicate metadata key 'a' at offset 41");
  GgufBytes empty_key;
  empty_key.header(0, 1).kv_u32("", 1);
  EXPECT_PARSE_ERROR(empty_key, "metadata key #0 at offset 24 is empty");
  GgufBytes bad_bool;
  bad_bool.header(0, 1).str("b").put<uint32_t>(7).put<uint8_t>(2);
  EXPECT_PARSE_ERROR(bad_bool, "bool value of key 'b' at offset 37 is 2, not 0 or 1");
  // Arrays of arrays 9 deep (limit 8).
  GgufBytes deep;
  deep.header(0, 1).str("d").put<uint32_t>(9);
  for (int i = 0; i < 9; ++i) deep.put<uint32_t>(9).put<uint64_t>(1);
  deep.put<uint32_t>(4).put<uint64_t>(0);
  EXPECT_PARSE_ERROR(deep, "key 'd': arrays nested deeper than 8");
  // ... 8 deep is fine.
  GgufBytes ok_deep;
  ok_deep.header(0, 1).str("d").put<uint32_t>(9);
  for (int i = 0; i < 7; ++i) ok_deep.put<uint32_t>(9).put<uint64_t>(1);
  ok_deep.put<uint32_t>(4).put<uint64_t>(1).put<uint32_t>(5);
  EXPECT_EQ(parse_error(ok_deep), "<parsed ok>");
}

TEST(GgufErrors, Alignment) {
  GgufBytes not_u32;
  not_u32.header(0, 1).str("general.alignment").put<uint32_t>(10).put<uint64_t>(32);
  EXPECT_PARSE_ERROR(not_u32, "key 'general.alignment' must be u32 but is u64");
  for (uint32_t a : {0u, 3u, 48u}) {
    GgufBytes g;
    g.header(0, 1).kv_u32("general.alignment", a);
    EXPECT_PARSE_ERROR(g, "is not a non-zero power of two");
  }
  GgufBytes a64;  // data section aligned to 64, tensor offsets must be multiples of 64
  a64.header(2, 1).kv_u32("general.alignment", 64).tensor("a", {4}, kF32, 0).tensor("b", {4}, kF32, 32);
  a64.pad(64).zeros(128);
  EXPECT_PARSE_ERROR(a64,
                     "tensor 'b' (info at offset 90): data offset 32 is not a multiple of the alignment 64");
}

TEST(GgufErrors, TensorInfos) {
  GgufBytes dims5;
  dims5.header(1, 0).tensor("t", {1, 1, 1, 1, 1}, kF32, 0).pad(32).zeros(32);
  EXPECT_PARSE_ERROR(dims5, "tensor 't' has 5 dimensions at offset 33 (at most 4)");
  EXPECT_PARSE_ERROR(one_tensor({4, -1}), "tensor 't' dimension 1 is -1 at offset");
  EXPECT_PARSE_ERROR(one_tensor({int64_t{1} << 32, int64_t{1} << 32}), "overflows int64");
  EXPECT_PARSE_ERROR(one_tensor({INT64_MAX, 2}), "overflows int64");
  // Empty, but its strides would overflow: rejected too.
  EXPECT_PARSE_ERROR(one_tensor({32, 0, int64_t{1} << 62}, kF32, 0, 0), "overflows int64");
  EXPECT_PARSE_ERROR(one_tensor({33, 1}, kQ8_0), "ne[0] = 33 is not a multiple of the q8_0 block size 32");
  EXPECT_PARSE_ERROR(one_tensor({4, 2}, 4), "tensor 't' has unknown type id 4 at offset");
  EXPECT_PARSE_ERROR(one_tensor({4, 2}, 41),
                     "unknown type id 41");  // 40 is NVFP4, 41 strata's fp8 KV rows (never in a file)
  EXPECT_PARSE_ERROR(one_tensor({4, 2}, 0xFFFFFFFFu), "unknown type id 4294967295");
  GgufBytes dup;
  dup.header(2, 0).tensor("t", {4}, kF32, 0).tensor("t", {4}, kF32, 32).pad(32).zeros(64);
  EXPECT_PARSE_ERROR(dup, "duplicate tensor name 't' at offset");
  GgufBytes empty_name;
  empty_name.header(1, 0).tensor("", {4}, kF32, 0).pad(32).zeros(32);
  EXPECT_PARSE_ERROR(empty_name, "tensor #0 at offset 24 has an empty name");
}

TEST(GgufErrors, TensorData) {
  // one_tensor(): infos end at 101 -> data section at 128; [4, 2] f32 = 32 bytes.
  EXPECT_PARSE_ERROR(one_tensor({4, 2}, kF32, 0, 31),
                     "tensor 't' data [128, 160) extends past end of file (size 159)");
  EXPECT_PARSE_ERROR(one_tensor({4, 2}, kF32, 32, 32), "tensor 't' data [160, 192) extends past end of file");
  EXPECT_PARSE_ERROR(one_tensor({4, 2}, kF32, uint64_t{1} << 63, 32), "extends past end of file");
  EXPECT_PARSE_ERROR(one_tensor({4, 2}, kF32, ~uint64_t{0} & ~uint64_t{31}, 32), "extends past end of file");
  EXPECT_PARSE_ERROR(one_tensor({4, 2}, kF32, 8, 64), "data offset 8 is not a multiple of the alignment 32");
  GgufBytes overlap;  // a: 64 bytes at 0, b at 32
  overlap.header(2, 0).tensor("a", {16}, kF32, 0).tensor("b", {4}, kF32, 32).pad(32).zeros(128);
  EXPECT_PARSE_ERROR(overlap, "tensors 'a' data [96, 160) and 'b' data [128, 144) overlap");
  GgufBytes same;  // two tensors at the same offset
  same.header(2, 0).tensor("a", {4}, kF32, 0).tensor("b", {4}, kF32, 0).pad(32).zeros(64);
  EXPECT_PARSE_ERROR(same, "overlap");
  GgufBytes no_data;  // infos end, padding runs past EOF
  no_data.header(1, 0).tensor("t", {4}, kF32, 0);
  EXPECT_PARSE_ERROR(no_data, "data section starts at offset 64");
  // Out of order but disjoint is fine.
  GgufBytes reordered;
  reordered.header(2, 0).tensor("a", {4}, kF32, 32).tensor("b", {4}, kF32, 0).pad(32).zeros(64);
  EXPECT_EQ(parse_error(reordered), "<parsed ok>");
}

TEST(GgufErrors, OpenNamesThePath) {
  auto missing = GgufFile::open("/nonexistent/x.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("cannot open '/nonexistent/x.gguf'"), std::string::npos)
      << missing.message();
  auto dir = GgufFile::open(::testing::TempDir());
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.message().find("not a regular file"), std::string::npos) << dir.message();

  const std::string path =
      ::testing::TempDir() + "/strata_gguf_errors_" + std::to_string(::getpid()) + ".gguf";
  { std::ofstream(path, std::ios::binary); }
  auto empty = GgufFile::open(path);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.message().find(path + ": file is empty"), std::string::npos) << empty.message();

  GgufBytes g = one_tensor({4, 2}, kF32, 0, 8);
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(g.b.data()), static_cast<std::streamsize>(g.b.size()));
  }
  auto bad = GgufFile::open(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("gguf: " + path + ": tensor 't' data [128, 160) extends past end of file"),
            std::string::npos)
      << bad.message();
  std::filesystem::remove(path);
}

TEST(GgufErrors, TypedGetters) {
  GgufBytes g;
  g.header(0, 4).kv_str("s", "hello").kv_u32("n", 7);
  g.str("arr").put<uint32_t>(9).put<uint32_t>(5).put<uint64_t>(2).put<int32_t>(-1).put<int32_t>(2);
  g.str("f").put<uint32_t>(6).put<float>(0.5f);
  std::vector<uint8_t> buf = g.b;
  auto f = GgufFile::from_memory(buf.data(), buf.size(), "t.gguf");
  ASSERT_TRUE(f.ok()) << f.message();
  const GgufFile& file = **f;
  auto msg = [](const auto& r) { return r.ok() ? std::string("<ok>") : r.message(); };
  EXPECT_EQ(msg(file.get_int("missing")), "gguf: t.gguf: metadata key 'missing' not found");
  EXPECT_EQ(msg(file.get_int("s")), "gguf: t.gguf: metadata key 's' has type string, expected an integer");
  EXPECT_EQ(msg(file.get_string("n")), "gguf: t.gguf: metadata key 'n' has type u32, expected string");
  EXPECT_EQ(msg(file.get_bool("f")), "gguf: t.gguf: metadata key 'f' has type f32, expected bool");
  EXPECT_EQ(msg(file.get_float("s")),
            "gguf: t.gguf: metadata key 's' has type string, expected a number (f32/f64 or integer)");
  EXPECT_EQ(msg(file.get_string_array("arr")),
            "gguf: t.gguf: metadata key 'arr' has type array of i32, expected an array of strings");
  EXPECT_EQ(msg(file.get_int_array("s")),
            "gguf: t.gguf: metadata key 's' has type string, expected an array of integers");
  EXPECT_EQ(file.get_int("n").value(), 7);
  EXPECT_EQ(file.get_float("n").value(), 7.0);  // integers convert to float
  EXPECT_EQ(file.get_float("f").value(), 0.5);
  EXPECT_EQ(file.get_int_array("arr").value(), (std::vector<int64_t>{-1, 2}));
  EXPECT_EQ(file.get_float_array("arr").value(), (std::vector<float>{-1.0f, 2.0f}));
  EXPECT_EQ(file.get_int_or("absent", 42).value(), 42);
  EXPECT_FALSE(file.get_int_or("s", 42).ok());  // present with the wrong type is still an error
  EXPECT_EQ(file.get_string_or("absent", "d").value(), "d");
  EXPECT_EQ(file.get_bool_or("absent", true).value(), true);
  EXPECT_EQ(file.get_float_or("absent", 1.5).value(), 1.5);
  EXPECT_EQ(file.get_array("s"), nullptr);
  EXPECT_EQ(file.get_array("absent"), nullptr);
  EXPECT_EQ(file.find("arr")->to_display(), "[-1, 2] (2 x i32)");
  EXPECT_EQ(file.find("s")->to_display(), "\"hello\"");
  EXPECT_EQ(file.find("f")->to_display(), "0.5");
}

}  // namespace
}  // namespace strata
