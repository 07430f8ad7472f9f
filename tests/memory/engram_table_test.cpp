// Engram tables in the real checkpoint's layout (F8_E4M3 values, UE8M0 scales as F8_E8M0 or U8):
// rows streamed from such a file equal the F32-converted resident rows bit for bit (the byte
// decoders themselves are tested in tests/quant/fp8_fp4_test.cpp), and tensors of other dtypes are refused
// naming file and tensor.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "format/safetensors_dir.h"
#include "format/safetensors_writer.h"
#include "memory/engram/engram_store.h"
#include "model/deepseek_v41/v41_engram.h"
#include "model/deepseek_v41/v41_quant.h"
#include "quant/fp8_fp4.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

struct TensorSpec {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

void write_safetensors(const std::string& path, const std::vector<TensorSpec>& ts) {
  std::vector<StTensorOut> out;
  for (const TensorSpec& t : ts) {
    StDtype d{};
    ASSERT_TRUE(st_dtype_parse(t.dtype, &d)) << t.dtype;
    out.push_back(st_tensor_bytes(t.name, d, t.shape, t.bytes));
  }
  auto w = ::strata::write_safetensors(path, out);
  ASSERT_TRUE(w.ok()) << w.message();
}

struct TmpDir {
  std::string path;
  explicit TmpDir(const std::string& tag) {
    path = "/tmp/strata_engram_" + tag + "_" + std::to_string(::getpid());
    fs::create_directories(path);
  }
  ~TmpDir() { fs::remove_all(path); }
};

TEST(EngramTable, Fp8RowsStreamBitIdenticalToF32Resident) {
  constexpr int64_t kRows = 1000;
  constexpr int kHd = 256;  // the real head dim: 8 scales per row
  std::mt19937 rng(3);
  std::vector<uint8_t> codes(static_cast<size_t>(kRows * kHd)), exps(static_cast<size_t>(kRows * kHd / 32));
  for (auto& c : codes) {
    c = static_cast<uint8_t>(rng());
    if ((c & 0x7f) == 0x7f) c &= 0xfe;  // no NaN codes
  }
  for (auto& e : exps) e = static_cast<uint8_t>(110 + rng() % 30);
  std::vector<float> fv(codes.size()), fs_(exps.size());
  for (size_t i = 0; i < codes.size(); ++i) fv[i] = e4m3_to_f32(codes[i]);
  for (size_t i = 0; i < exps.size(); ++i) fs_[i] = std::ldexp(1.0f, exps[i] - 127);
  for (const char* scale_dtype : {"F8_E8M0", "U8"}) {
    TmpDir dir(std::string("fp8_") + scale_dtype);
    // a filler tensor first so the table starts at an unaligned offset
    write_safetensors(dir.path + "/model.safetensors",
                      {{"filler", "U8", {777}, std::vector<uint8_t>(777, 1)},
                       {"layers.14.engram.embed.weight", "F8_E4M3", {kRows, kHd}, codes},
                       {"layers.14.engram.embed.scale", scale_dtype, {kRows, kHd / 32}, exps}});
    auto d = SafetensorsDir::open(dir.path);
    ASSERT_TRUE(d.ok()) << d.message();
    auto t = engram_table_from_checkpoint(**d, 14, kRows, kHd);
    ASSERT_TRUE(t.ok()) << t.message();
    EXPECT_EQ(t->vtype, EngramValueType::f8_e4m3);
    EXPECT_EQ(t->stype, EngramScaleType::e8m0);
    EXPECT_EQ(t->row_bytes(), 256u + 8u);  // deepseek-v4.md §3.2: 256 FP8 values + 8 UE8M0 scales
    EngramStoreOptions o;
    o.budget_bytes = 100 * (t->row_bytes() + EngramStore::kSlotOverhead);
    o.io_threads = 2;
    auto st = EngramStore::open({*t}, o);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ((*st)->info().tier, "ssd");
    std::vector<int64_t> ids;
    for (int i = 0; i < 300; ++i) ids.push_back(static_cast<int64_t>(rng() % kRows));
    std::vector<float> out(ids.size() * kHd), want(kHd);
    (*st)->begin_step(1);
    (*st)->prefetch(0, ids.data(), 50);
    ASSERT_TRUE((*st)->rows(0, ids.data(), static_cast<int64_t>(ids.size()), out.data()).ok());
    for (size_t j = 0; j < ids.size(); ++j) {
      v41::engram_dequant_row(fv.data() + ids[j] * kHd, fs_.data() + ids[j] * (kHd / 32), kHd, want.data());
      ASSERT_EQ(0, std::memcmp(want.data(), out.data() + j * kHd, kHd * 4))
          << scale_dtype << " row " << ids[j];
    }
  }
}

TEST(EngramTable, WrongDtypesAndSplitShardsAreRefused) {
  TmpDir dir("dtype");
  const std::string file = dir.path + "/model.safetensors";
  write_safetensors(file, {{"layers.1.engram.embed.weight", "BF16", {4, 32}, std::vector<uint8_t>(256)},
                           {"layers.1.engram.embed.scale", "F32", {4, 1}, std::vector<uint8_t>(16)},
                           {"layers.2.engram.embed.weight", "F32", {4, 32}, std::vector<uint8_t>(512)},
                           {"layers.2.engram.embed.scale", "F16", {4, 1}, std::vector<uint8_t>(8)}});
  auto d = SafetensorsDir::open(dir.path);
  ASSERT_TRUE(d.ok()) << d.message();
  auto a = engram_table_from_checkpoint(**d, 1, 4, 32);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.message().find(file), std::string::npos) << a.message();
  EXPECT_NE(a.message().find(
                "layers.1.engram.embed.weight: dtype BF16, expected F32 (e4m3-grid values) or F8_E4M3"),
            std::string::npos)
      << a.message();
  auto b = engram_table_from_checkpoint(**d, 2, 4, 32);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(
      b.message().find("layers.2.engram.embed.scale: dtype F16, expected F32 (powers of two), F8_E8M0 or U8"),
      std::string::npos)
      << b.message();
}

}  // namespace
}  // namespace strata
