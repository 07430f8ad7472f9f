// GgufWriter: write -> read gives identical metadata and tensor bytes; rewriting a llama.cpp-made
// fixture reproduces it byte for byte (so llama.cpp's own reader accepts what we write).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/fixtures.h"
#include "format/gguf.h"

namespace strata {
namespace {

using VT = GgufValueType;

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void expect_same_metadata(const GgufFile& a, const GgufFile& b) {
  ASSERT_EQ(a.metadata().size(), b.metadata().size());
  for (size_t i = 0; i < a.metadata().size(); ++i) {
    EXPECT_EQ(a.metadata()[i].key, b.metadata()[i].key);
    EXPECT_TRUE(gguf_value_equal(a.metadata()[i].value, b.metadata()[i].value)) << a.metadata()[i].key;
  }
}

void expect_same_tensors(const GgufFile& a, const GgufFile& b) {
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    const TensorView& x = a.tensors()[i];
    const TensorView& y = b.tensors()[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.type, y.type);
    EXPECT_EQ(x.n_dims, y.n_dims);
    for (int d = 0; d < kMaxDims; ++d) EXPECT_EQ(x.ne[d], y.ne[d]) << x.name;
    ASSERT_EQ(x.nbytes, y.nbytes);
    EXPECT_EQ(std::memcmp(x.data, y.data, x.nbytes), 0) << x.name;
  }
}

// A writer holding one of everything: every scalar type, strings, arrays of each type, arrays of
// arrays, an empty array, and tensors of several types and ranks.
struct Sample {
  std::vector<float> f32_data = std::vector<float>(3 * 5);
  std::vector<uint8_t> q8_data = std::vector<uint8_t>(34 * 2 * 3);
  std::vector<uint8_t> mx_data = std::vector<uint8_t>(17 * 2 * 4 * 2);
  std::vector<int32_t> i32_data = std::vector<int32_t>(7);
  GgufWriter w;

  explicit Sample(uint32_t alignment) {
    for (size_t i = 0; i < f32_data.size(); ++i) f32_data[i] = 0.25f * static_cast<float>(i) - 1.0f;
    for (size_t i = 0; i < q8_data.size(); ++i) q8_data[i] = static_cast<uint8_t>(i * 7 + 1);
    for (size_t i = 0; i < mx_data.size(); ++i) mx_data[i] = static_cast<uint8_t>(i * 13 + 3);
    for (size_t i = 0; i < i32_data.size(); ++i) i32_data[i] = static_cast<int32_t>(i) - 3;
    w.set_string("general.architecture", "test");
    w.set_alignment(alignment);
    w.set_value("t.u8", gguf_make_int(VT::u8, 255));
    w.set_value("t.i8", gguf_make_int(VT::i8, -128));
    w.set_value("t.u16", gguf_make_int(VT::u16, 65535));
    w.set_value("t.i16", gguf_make_int(VT::i16, -32768));
    w.set_u32("t.u32", 4000000000u);
    w.set_i32("t.i32", -2000000000);
    w.set_u64("t.u64", ~uint64_t{0});
    w.set_value("t.i64", gguf_make_int(VT::i64, INT64_MIN));
    w.set_f32("t.f32", 1.5e-6f);
    w.set_value("t.f64", gguf_make_float(VT::f64, 3.141592653589793));
    w.set_bool("t.bool", true);
    w.set_string("t.str", std::string("with\0nul and \xe2\x96\x81 utf8", 20));
    w.set_string("t.empty_str", "");
    w.set_array_i32("t.arr_i32", {1, -2, 3});
    w.set_array_u32("t.arr_u32", {7, 8});
    w.set_array_f32("t.arr_f32", {0.5f, -0.25f});
    w.set_array_string("t.arr_str", {"a", "", "ccc"});
    w.set_value("t.arr_empty", gguf_make_array(VT::u16, {}));
    w.set_value("t.arr_bool", gguf_make_array(VT::boolean, {gguf_make_bool(false), gguf_make_bool(true)}));
    w.set_value("t.arr_arr",
                gguf_make_array(VT::array, {gguf_make_array(VT::i32, {gguf_make_int(VT::i32, 1)}),
                                            gguf_make_array(VT::string, {gguf_make_string("x")}),
                                            gguf_make_array(VT::array, {gguf_make_array(VT::f64, {})})}));
    EXPECT_TRUE(w.add_tensor("a.f32", GgmlType::f32, {3, 5}, f32_data.data()).ok());
    EXPECT_TRUE(w.add_tensor("b.q8", GgmlType::q8_0, {64, 3}, q8_data.data()).ok());
    EXPECT_TRUE(w.add_tensor("c.mxfp4", GgmlType::mxfp4, {64, 4, 2}, mx_data.data()).ok());
    EXPECT_TRUE(w.add_tensor("d.i32", GgmlType::i32, {7}, i32_data.data()).ok());
    EXPECT_TRUE(w.add_tensor("e.empty", GgmlType::f32, {0, 4}, nullptr).ok());
  }
};

TEST(GgufWriter, RoundTripEveryValueTypeInMemory) {
  for (uint32_t alignment : {1u, 8u, 32u, 64u, 4096u}) {
    Sample s(alignment);
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(s.w.write_to_memory(&bytes).ok());
    auto f = GgufFile::from_memory(bytes.data(), bytes.size());
    ASSERT_TRUE(f.ok()) << f.message();
    const GgufFile& g = **f;
    EXPECT_EQ(g.version(), 3u);
    EXPECT_EQ(g.alignment(), alignment);
    EXPECT_EQ(g.data_offset() % alignment, 0u);
    EXPECT_EQ(g.metadata().size(), 22u);
    EXPECT_EQ(g.get_int("t.u8").value(), 255);
    EXPECT_EQ(g.get_int("t.i8").value(), -128);
    EXPECT_EQ(g.get_int("t.u32").value(), 4000000000);
    EXPECT_EQ(g.get_int("t.i64").value(), INT64_MIN);
    EXPECT_FALSE(g.get_int("t.u64").ok());  // 2^64-1 does not fit in int64
    EXPECT_EQ(std::get<uint64_t>(g.find("t.u64")->v), ~uint64_t{0});
    EXPECT_EQ(static_cast<float>(g.get_float("t.f32").value()), 1.5e-6f);
    EXPECT_EQ(g.get_float("t.f64").value(), 3.141592653589793);
    EXPECT_EQ(g.get_bool("t.bool").value(), true);
    EXPECT_EQ(g.get_string("t.str").value(), std::string("with\0nul and \xe2\x96\x81 utf8", 20));
    EXPECT_EQ(g.get_int_array("t.arr_i32").value(), (std::vector<int64_t>{1, -2, 3}));
    EXPECT_EQ(g.get_float_array("t.arr_f32").value(), (std::vector<float>{0.5f, -0.25f}));
    EXPECT_EQ(g.get_string_array("t.arr_str").value(), (std::vector<std::string>{"a", "", "ccc"}));
    EXPECT_EQ(g.get_array("t.arr_empty")->elem_type, VT::u16);
    const GgufArray* aa = g.get_array("t.arr_arr");
    ASSERT_NE(aa, nullptr);
    ASSERT_EQ(aa->items.size(), 3u);
    EXPECT_EQ(aa->items[1].as_array()->items[0].as_string()[0], "x");
    EXPECT_EQ(aa->items[2].as_array()->items[0].as_array()->elem_type, VT::f64);
    for (size_t i = 0; i < g.metadata().size(); ++i) {
      // writer order is kept; set_alignment placed general.alignment second
      EXPECT_FALSE(g.metadata()[i].key.empty());
    }
    const TensorView* c = g.find_tensor("c.mxfp4");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->shape_string(), "mxfp4 [64, 4, 2]");
    EXPECT_EQ(std::memcmp(c->data, s.mx_data.data(), s.mx_data.size()), 0);
    EXPECT_EQ(std::memcmp(g.find_tensor("a.f32")->data, s.f32_data.data(), 60), 0);
    EXPECT_EQ(std::memcmp(g.find_tensor("b.q8")->data, s.q8_data.data(), s.q8_data.size()), 0);
    EXPECT_EQ(std::memcmp(g.find_tensor("d.i32")->data, s.i32_data.data(), 28), 0);
    EXPECT_EQ(g.find_tensor("e.empty")->nbytes, 0u);
    for (const TensorView& t : g.tensors())
      EXPECT_EQ((static_cast<const uint8_t*>(t.data) - bytes.data()) % alignment, 0u) << t.name;
  }
}

TEST(GgufWriter, WriteToFileMatchesMemory) {
  Sample s(32);
  const std::string path =
      ::testing::TempDir() + "/strata_writer_test_" + std::to_string(::getpid()) + ".gguf";
  ASSERT_TRUE(s.w.write(path).ok());
  std::vector<uint8_t> mem;
  ASSERT_TRUE(s.w.write_to_memory(&mem).ok());
  EXPECT_EQ(read_all(path), mem);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.message();
  auto m = GgufFile::from_memory(mem.data(), mem.size());
  ASSERT_TRUE(m.ok());
  expect_same_metadata(**f, **m);
  expect_same_tensors(**f, **m);
  std::filesystem::remove(path);
}

// Tensors produced at write time give the same bytes as tensors given up front; a fill that fails
// stops the write and leaves no file.
TEST(GgufWriter, FilledTensorsMatchAndFailuresLeaveNoFile) {
  std::vector<float> a(64), b(96);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) * 0.5f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = -static_cast<float>(i);
  GgufWriter direct, filled;
  ASSERT_TRUE(direct.add_tensor("a", GgmlType::f32, {64}, a.data()).ok());
  ASSERT_TRUE(direct.add_tensor("b", GgmlType::f32, {32, 3}, b.data()).ok());
  int calls = 0;
  auto from = [&calls](const std::vector<float>& v) {
    return [&calls, &v](uint8_t* dst, size_t n) -> Status {
      EXPECT_EQ(n, v.size() * sizeof(float));
      std::memcpy(dst, v.data(), n);
      ++calls;
      return {};
    };
  };
  ASSERT_TRUE(filled.add_tensor("a", GgmlType::f32, {64}, from(a)).ok());
  ASSERT_TRUE(filled.add_tensor("b", GgmlType::f32, {32, 3}, from(b)).ok());
  std::vector<uint8_t> m1, m2;
  ASSERT_TRUE(direct.write_to_memory(&m1).ok());
  ASSERT_TRUE(filled.write_to_memory(&m2).ok());
  EXPECT_EQ(m1, m2);
  EXPECT_EQ(calls, 2);

  GgufWriter bad;
  ASSERT_TRUE(bad.add_tensor("a", GgmlType::f32, {64}, a.data()).ok());
  ASSERT_TRUE(bad.add_tensor("b", GgmlType::f32, {64},
                             [](uint8_t*, size_t) -> Status { return err("tensor b: no bytes today"); })
                  .ok());
  EXPECT_FALSE(bad.add_tensor("c", GgmlType::f32, {64}, GgufWriter::TensorFill{}).ok());
  const std::string path =
      ::testing::TempDir() + "/strata_writer_fill_" + std::to_string(::getpid()) + ".gguf";
  Status st = bad.write(path);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("tensor b: no bytes today"), std::string::npos) << st.message();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(GgufWriter, WriteToBadPathFails) {
  Sample s(32);
  Status st = s.w.write("/nonexistent-dir/x.gguf");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/nonexistent-dir/x.gguf"), std::string::npos) << st.message();
}

// Rewriting a llama.cpp-made file (metadata + tensors in file order) reproduces it byte for byte.
TEST(GgufWriter, RewritesFixturesByteIdentical) {
  STRATA_REQUIRE_FIXTURES(dir);
  for (const char* name :
       {"tiny-qwen2moe-Q8_0.gguf", "tiny-gpt-oss-MXFP4_MOE.gguf", "tiny-qwen3moe-Q4_0.gguf"}) {
    const std::string path = dir + "/models/" + name;
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.ok()) << f.message();
    GgufWriter w;
    for (const GgufKv& kv : (*f)->metadata()) w.set_value(kv.key, kv.value);
    for (const TensorView& t : (*f)->tensors()) {
      std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
      ASSERT_TRUE(w.add_tensor(t.name, t.type, ne, t.data).ok());
    }
    std::vector<uint8_t> out;
    ASSERT_TRUE(w.write_to_memory(&out).ok());
    const std::vector<uint8_t> orig = read_all(path);
    ASSERT_EQ(out.size(), orig.size()) << name;
    EXPECT_TRUE(out == orig) << name;
  }
}

TEST(GgufWriter, RejectsBadTensors) {
  GgufWriter w;
  float x[64] = {};
  EXPECT_TRUE(w.add_tensor("x", GgmlType::f32, {64}, x).ok());
  auto expect_err = [](Status st, const char* substr) {
    ASSERT_FALSE(st.ok()) << substr;
    EXPECT_NE(st.message().find(substr), std::string::npos) << st.message();
  };
  expect_err(w.add_tensor("x", GgmlType::f32, {64}, x), "duplicate tensor name 'x'");
  expect_err(w.add_tensor("", GgmlType::f32, {64}, x), "empty tensor name");
  expect_err(w.add_tensor(std::string(64, 'n'), GgmlType::f32, {1}, x), "at most 63");
  expect_err(w.add_tensor("q", GgmlType::q8_0, {33}, x), "not a multiple of the q8_0 block size 32");
  expect_err(w.add_tensor("d", GgmlType::f32, {1, 1, 1, 1, 1}, x), "5 dimensions");
  expect_err(w.add_tensor("n", GgmlType::f32, {-1}, x), "dimension 0 is -1");
  expect_err(w.add_tensor("o", GgmlType::f32, {INT64_MAX, 2}, x), "overflows");
  expect_err(w.add_tensor("o0", GgmlType::f32, {32, 0, int64_t{1} << 62}, x), "overflows");
  expect_err(w.add_tensor("u", static_cast<GgmlType>(4), {32}, x), "unknown type id 4");
  expect_err(w.add_tensor("z", GgmlType::f32, {4}, nullptr), "null data");
}

TEST(GgufWriter, RejectsBadValues) {
  auto write_err = [](GgufWriter& w) {
    std::vector<uint8_t> out;
    Status st = w.write_to_memory(&out);
    return st.ok() ? std::string() : st.message();
  };
  {
    GgufWriter w;
    w.set_value("k", gguf_make_int(VT::u8, 256));
    EXPECT_NE(write_err(w).find("key 'k': value 256 does not fit in u8"), std::string::npos) << write_err(w);
  }
  {
    GgufWriter w;
    w.set_value("k", gguf_make_int(VT::i16, -40000));
    EXPECT_NE(write_err(w).find("does not fit in i16"), std::string::npos) << write_err(w);
  }
  {
    GgufWriter w;
    w.set_value("k", gguf_make_array(VT::i32, {gguf_make_string("no")}));
    EXPECT_NE(write_err(w).find("element 0 has type string in an array of i32"), std::string::npos);
  }
  {
    GgufWriter w;
    GgufValue v;
    v.type = VT::string;
    v.v = uint64_t{1};
    w.set_value("k", v);
    EXPECT_NE(write_err(w).find("key 'k' of type string does not hold a string"), std::string::npos);
  }
  {
    GgufWriter w;
    w.set_alignment(48);
    EXPECT_NE(write_err(w).find("alignment 48 is not a non-zero power of two"), std::string::npos);
  }
  {
    GgufWriter w;
    w.set_value("general.alignment", gguf_make_int(VT::u64, 64));
    EXPECT_NE(write_err(w).find("must be a u32"), std::string::npos);
  }
  {
    GgufWriter w;
    w.set_value("", gguf_make_bool(true));
    EXPECT_NE(write_err(w).find("empty metadata key"), std::string::npos);
  }
  {  // set_value replaces an existing key in place
    GgufWriter w;
    w.set_u32("k", 1);
    w.set_u32("k", 2);
    std::vector<uint8_t> out;
    ASSERT_TRUE(w.write_to_memory(&out).ok());
    auto f = GgufFile::from_memory(out.data(), out.size());
    ASSERT_TRUE(f.ok());
    EXPECT_EQ((*f)->metadata().size(), 1u);
    EXPECT_EQ((*f)->get_int("k").value(), 2);
  }
}

}  // namespace
}  // namespace strata
