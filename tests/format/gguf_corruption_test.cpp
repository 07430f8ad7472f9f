// Corrupted real files: truncations at many offsets, byte flips in the header / metadata /
// tensor-info region, and targeted edits of every structural field (counts, lengths, types,
// dims, offsets). Every case must return an error or parse into a consistent file; never crash
// or read out of bounds (these tests run under ASan + UBSan in CI).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

#include "common/fixtures.h"
#include "format/gguf.h"

namespace strata {
namespace {

enum class Field {
  count,
  str_len,
  value_type,
  elem_type,
  array_len,
  n_dims,
  dim,
  tensor_type,
  tensor_offset
};

struct FieldPos {
  Field kind;
  size_t at;    // byte offset of the field
  size_t size;  // 4 or 8
};

// Walks a *valid* GGUF buffer and records where its structural fields are. Long arrays record
// only their first and last few elements (enough to hit every code path, fast enough for ASan).
class FieldScanner {
 public:
  explicit FieldScanner(const std::vector<uint8_t>& b) : b_(b) {}

  std::vector<FieldPos> scan() {
    pos_ = 8;
    const uint64_t n_tensors = u64(Field::count);
    const uint64_t n_kv = u64(Field::count);
    for (uint64_t i = 0; i < n_kv; ++i) {
      str(true);
      value(static_cast<GgufValueType>(u32(Field::value_type)), true);
    }
    for (uint64_t i = 0; i < n_tensors; ++i) {
      str(true);
      const uint32_t nd = u32(Field::n_dims);
      for (uint32_t d = 0; d < nd; ++d) u64(Field::dim);
      u32(Field::tensor_type);
      u64(Field::tensor_offset);
    }
    return fields_;
  }

 private:
  template <class T>
  T read(Field k, bool record) {
    T x;
    std::memcpy(&x, b_.data() + pos_, sizeof x);
    if (record) fields_.push_back({k, pos_, sizeof x});
    pos_ += sizeof x;
    return x;
  }
  uint64_t u64(Field k, bool record = true) { return read<uint64_t>(k, record); }
  uint32_t u32(Field k, bool record = true) { return read<uint32_t>(k, record); }
  void str(bool record) { pos_ += u64(Field::str_len, record); }
  void value(GgufValueType t, bool record) {
    if (t == GgufValueType::string) return str(record);
    if (t != GgufValueType::array) {
      pos_ += t == GgufValueType::u8 || t == GgufValueType::i8 || t == GgufValueType::boolean ? 1
              : t == GgufValueType::u16 || t == GgufValueType::i16                            ? 2
              : t == GgufValueType::u64 || t == GgufValueType::i64 || t == GgufValueType::f64 ? 8
                                                                                              : 4;
      return;
    }
    const auto et = static_cast<GgufValueType>(u32(Field::elem_type, record));
    const uint64_t n = u64(Field::array_len, record);
    for (uint64_t i = 0; i < n; ++i) value(et, record && (i < 3 || i + 3 >= n));
  }

  const std::vector<uint8_t>& b_;
  size_t pos_ = 0;
  std::vector<FieldPos> fields_;
};

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Parses an exact-size copy. On success checks that every view lies inside the buffer and reads
// its first and last byte and every metadata value (ASan reports any stray pointer).
bool parse_consistent(std::vector<uint8_t> buf, std::string* error = nullptr) {
  buf.shrink_to_fit();  // exact-size heap block: ASan flags any read past the end
  auto f = GgufFile::from_memory(buf.data(), buf.size(), "c.gguf");
  if (!f.ok()) {
    EXPECT_EQ(f.message().rfind("gguf: c.gguf: ", 0), 0u) << f.message();
    if (error) *error = f.message();
    return false;
  }
  const uint8_t* lo = buf.data();
  const uint8_t* hi = buf.data() + buf.size();
  unsigned sink = 0;
  for (const TensorView& t : (*f)->tensors()) {
    const auto* p = static_cast<const uint8_t*>(t.data);
    EXPECT_TRUE(p >= lo && p + t.nbytes <= hi) << t.name;
    EXPECT_EQ(t.nbytes, t.nb[3] * static_cast<size_t>(t.ne[3])) << t.name;
    if (t.nbytes) sink += p[0] + p[t.nbytes - 1];
  }
  for (const GgufKv& kv : (*f)->metadata()) sink += static_cast<unsigned>(kv.value.to_display(4).size());
  (void)sink;
  return true;
}

class GgufCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = ::strata::testing::fixtures_dir();
    if (!dir) {
      if (::strata::testing::running_in_ci()) FAIL() << "fixtures not found (set STRATA_FIXTURES)";
      GTEST_SKIP() << "fixtures not found";
    }
    orig_ = read_all(*dir + "/models/tiny-qwen2moe-Q8_0.gguf");
    ASSERT_FALSE(orig_.empty());
    auto f = GgufFile::from_memory(orig_.data(), orig_.size());
    ASSERT_TRUE(f.ok()) << f.message();
    data_offset_ = (*f)->data_offset();
    for (const TensorView& t : (*f)->tensors()) {
      const size_t end = static_cast<size_t>(static_cast<const uint8_t*>(t.data) - orig_.data()) + t.nbytes;
      data_end_ = std::max(data_end_, end);
    }
    // The same metadata and tensor infos with every tensor shrunk to one block: the mutation
    // tests copy the file once per case, and 20 KiB instead of 250 KiB keeps them fast under ASan.
    GgufWriter w;
    for (const GgufKv& kv : (*f)->metadata()) w.set_value(kv.key, kv.value);
    std::vector<uint8_t> block(512, 0x3c);
    for (const TensorView& t : (*f)->tensors()) {
      std::vector<int64_t> ne(static_cast<size_t>(t.n_dims), 1);
      ne[0] = type_info(t.type).block_size;
      ASSERT_TRUE(w.add_tensor(t.name, t.type, ne, block.data()).ok());
    }
    ASSERT_TRUE(w.write_to_memory(&small_).ok());
    ASSERT_TRUE(GgufFile::from_memory(small_.data(), small_.size()).ok());
  }
  std::vector<uint8_t> orig_;
  std::vector<uint8_t> small_;
  size_t data_offset_ = 0;
  size_t data_end_ = 0;  // end of the last tensor's bytes (padding may follow)
};

TEST_F(GgufCorruption, Truncation) {
  size_t n = 0;
  // Every offset in the first 2 KiB and around the data section start, every 7th in between,
  // every 509th in the data.
  for (size_t cut = 0; cut < orig_.size();
       cut += (cut < 2048 || (cut + 64 > data_offset_ && cut < data_offset_ + 64)) ? 1
              : cut < data_offset_                                                 ? 7
                                                                                   : 509) {
    std::string e;
    const bool ok = parse_consistent(
        std::vector<uint8_t>(orig_.begin(), orig_.begin() + static_cast<std::ptrdiff_t>(cut)), &e);
    if (cut < data_end_) {
      EXPECT_FALSE(ok) << "cut at " << cut;
    }
    if (!ok && cut >= data_offset_) {
      EXPECT_NE(e.find("extends past end of file"), std::string::npos) << e;
    }
    ++n;
  }
  EXPECT_GT(n, data_offset_ / 7);
  std::printf("[ info ] %zu truncations (data section at %zu)\n", n, data_offset_);
}

TEST_F(GgufCorruption, ByteFlipsInHeaderRegion) {
  std::mt19937_64 rng(1234);
  size_t errors = 0, parsed = 0;
  auto run = [&](size_t at, uint8_t x) {
    std::vector<uint8_t> t = small_;
    t[at] ^= x;
    (parse_consistent(std::move(t)) ? parsed : errors)++;
  };
  for (size_t at = 0; at < 64; ++at)
    for (uint8_t x : {0x01, 0x80, 0xFF}) run(at, x);
  for (int i = 0; i < 2000; ++i) run(rng() % data_offset_, static_cast<uint8_t>(1 + rng() % 255));
  EXPECT_GT(errors, 0u);
  EXPECT_GT(parsed, 0u);  // most flips inside token strings are harmless
}

TEST_F(GgufCorruption, FieldEdits) {
  const std::vector<FieldPos> fields = FieldScanner(small_).scan();
  ASSERT_GT(fields.size(), 200u);
  const uint64_t big[] = {uint64_t{1} << 31, uint64_t{1} << 32, uint64_t{1} << 60, uint64_t{1} << 63,
                          ~uint64_t{0},      small_.size(),     small_.size() - 1};
  size_t cases = 0, errors = 0;
  for (const FieldPos& f : fields) {
    uint64_t cur = 0;
    std::memcpy(&cur, small_.data() + f.at, f.size);
    std::vector<uint64_t> vals = {0, 1, cur + 1, cur - 1, cur * 2, cur + 32, cur + 4096};
    vals.insert(vals.end(), std::begin(big), std::end(big));
    if (f.kind == Field::value_type || f.kind == Field::elem_type || f.kind == Field::tensor_type)
      for (uint64_t v = 0; v <= 41; ++v) vals.push_back(v);
    if (f.kind == Field::n_dims) vals.insert(vals.end(), {2, 3, 4, 5});
    if (f.kind == Field::dim) vals.insert(vals.end(), {uint64_t(-1), 31, 33});
    for (uint64_t v : vals) {
      if (v == cur) continue;
      std::vector<uint8_t> t = small_;
      std::memcpy(t.data() + f.at, &v, f.size);  // little-endian: low bytes of v
      errors += parse_consistent(std::move(t)) ? 0 : 1;
      ++cases;
    }
  }
  EXPECT_GT(errors, cases / 2);
  std::printf("[ info ] %zu fields, %zu edits, %zu rejected\n", fields.size(), cases, errors);
}

}  // namespace
}  // namespace strata
