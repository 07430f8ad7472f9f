// deepseek_v41 blocks against scalar code written from the equations (fixtures-v41 README,
// deepseek-v4.md §4): Engram hashing and gating, the two-level candidate top-k, the FP8/FP4
// activation rounding; plus bad-input loading (wrong dtype, missing tensor, engram_meta that
// does not match the tables).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "common/fixtures.h"
#include "kernels/kv_rows.h"
#include "model/deepseek_v41/v41_arch.h"
#include "model/deepseek_v41/v41_engram.h"
#include "model/deepseek_v41/v41_quant.h"
#include "model/deepseek_v41/v41_select.h"

namespace strata::v41 {
namespace {

// The element roundings themselves are tested in tests/quant/fp8_fp4_test.cpp.
TEST(V41Quant, Fp4BlockOnTheE2m1Grid) {
  // fp4 block: amax 3 -> scale ue8m0_ceil(0.5) = 0.5; values on the e2m1 grid times 0.5.
  float x[32] = {3.0f, -1.1f, 0.2f};
  fake_quant_fp4(x, 32);
  EXPECT_EQ(x[0], 3.0f);
  EXPECT_EQ(x[1], -1.0f);
  EXPECT_EQ(x[2], 0.25f);
}

// The rows the forward rounds (window FP8, index keys FP4, compressed KV FP4 with E4M3 scales) go
// through the KV codecs (quant/: fp8_e4m3, mxfp4, nvfp4) and decode to the same values: bit for bit,
// but E2M1's -0 which reads +0. Blocks span 2^-24 .. 2^12, with maxima that round down (the codec
// may then take a smaller scale: the same values) and all-zero blocks. The FP8 codec picks the
// reference's scale and rounding itself: the unrounded row decodes to fake_quant_fp8's values (the
// window's path).
TEST(V41Quant, RoundedRowsSurviveTheKvCodecs) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-24, 12), pick(0, 5);
  constexpr int64_t kW = 512;
  struct Fmt {
    GgmlType type;
    void (*round)(float*, int64_t, int);
    int block;
  };
  for (const Fmt f : {Fmt{GgmlType::fp8_e4m3, fake_quant_fp8, 32}, Fmt{GgmlType::mxfp4, fake_quant_fp4, 32},
                      Fmt{GgmlType::nvfp4, fake_quant_fp4_e4m3, 16}}) {
    std::vector<uint8_t> buf(row_bytes(f.type, kW));
    const KvRows rows = KvRows::typed(buf.data(), kW, 1, false, f.type);
    int64_t checked = 0;
    for (int it = 0; it < 100; ++it) {
      std::vector<float> x(kW), y(kW);
      for (int64_t b = 0; b < kW; b += f.block) {
        const float sc = std::ldexp(1.0f, ex(rng));
        const int kind = pick(rng);
        for (int i = 0; i < f.block; ++i) {
          float v = bf16r(u(rng) * sc);
          if (kind == 0) v = 0.0f;                                  // all-zero block
          if (kind == 1 && i == 0) v = bf16r(0.49f * 448.0f * sc);  // FP8 max rounds down to 224 s
          if (kind == 2 && i == 0) v = bf16r(0.45f * 6.0f * sc);    // FP4 max code 3 or less
          x[static_cast<size_t>(b + i)] = v;
        }
      }
      if (f.type == GgmlType::fp8_e4m3) {  // the unrounded row: the codec rounds as the reference does
        std::vector<float> r = x;
        f.round(r.data(), kW, f.block);
        kv_store(rows, 0, 0, x.data(), kW);
        kv_to_f32(rows, 0, y.data());
        for (int64_t i = 0; i < kW; ++i)
          ASSERT_EQ(f32_bits(r[static_cast<size_t>(i)]), f32_bits(y[static_cast<size_t>(i)]))
              << "fp8 raw " << i;
      }
      f.round(x.data(), kW, f.block);
      kv_store(rows, 0, 0, x.data(), kW);
      kv_to_f32(rows, 0, y.data());
      for (int64_t i = 0; i < kW; ++i) {
        const float a = x[static_cast<size_t>(i)], b = y[static_cast<size_t>(i)];
        if (a == 0.0f && f.type != GgmlType::fp8_e4m3)
          ASSERT_EQ(f32_bits(b), 0u) << type_info(f.type).name << " value " << i;
        else
          ASSERT_EQ(f32_bits(a), f32_bits(b))
              << type_info(f.type).name << " value " << i << ": " << a << " -> " << b;
        ++checked;
      }
    }
    EXPECT_EQ(checked, 100 * kW);
  }
}

TEST(V41Engram, HashMatchesEquations) {
  Config c;
  c.engram_max_ngram = 4;
  c.engram_heads = 2;
  EngramMeta m;
  m.token_map = {0, 1, 1, 2, 3};
  m.pad_id = 1;
  m.multipliers = {{1000003, 7777777, 99991, 31}};
  m.primes = {{67, 71, 73, 79, 83, 89}};
  m.offsets = {{0, 67, 138, 211, 290, 379}};
  const int32_t ids[] = {4, 3, 0, 2, 4};
  for (int64_t pos = 0; pos < 5; ++pos) {
    int64_t cids[4], rows[6];
    engram_cids(m, ids, pos, 4, cids);
    engram_hash(m, 0, cids, 4, 2, rows);
    // Scalar reference from the README, in 128-bit arithmetic.
    __int128 h = 0;
    for (int n = 0; n < 4; ++n) {
      const int64_t cid = pos - n >= 0 ? m.token_map[ids[pos - n]] : m.pad_id;
      const __int128 p = static_cast<__int128>(cid) * m.multipliers[0][n];
      h = n == 0 ? p : (h ^ p);
      if (n == 0) continue;
      for (int j = 0; j < 2; ++j) {
        const int col = (n - 1) * 2 + j;
        EXPECT_EQ(rows[col], static_cast<int64_t>(h % m.primes[0][col]) + m.offsets[0][col])
            << pos << " " << col;
        EXPECT_GE(rows[col], m.offsets[0][col]);
        EXPECT_LT(rows[col], m.offsets[0][col] + m.primes[0][col]);
      }
    }
  }
}

TEST(V41Engram, GateMatchesEquations) {
  const int hc = 2, D = 64;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  std::vector<float> H(hc * D), key(hc * D), val(D), qw(hc * D), kw(hc * D);
  for (auto* v : {&H, &key, &qw, &kw})
    for (float& f : *v) f = bf16r(nd(rng));
  for (float& f : val) f = bf16r(nd(rng));
  std::vector<float> out = H;
  engram_gate(out.data(), key.data(), val.data(), qw.data(), kw.data(), hc, D, 1e-20f);
  for (int c = 0; c < hc; ++c) {
    double dot = 0, hh = 0, kk = 0;
    for (int d = 0; d < D; ++d) {
      dot += double(H[c * D + d]) * qw[c * D + d] * kw[c * D + d] * key[c * D + d];
      hh += double(H[c * D + d]) * H[c * D + d];
      kk += double(key[c * D + d]) * key[c * D + d];
    }
    const double g0 = dot / std::sqrt(hh / D) / std::sqrt(kk / D) / std::sqrt(double(D));
    const double g = 1 / (1 + std::exp(-std::copysign(std::sqrt(std::max(std::fabs(g0), 1e-6)), g0)));
    for (int d = 0; d < D; ++d)
      EXPECT_NEAR(out[c * D + d], H[c * D + d] + g * val[d], 0.01 * (1 + std::fabs(out[c * D + d])));
  }
}

TEST(V41Select, TwoLevelTopK) {
  // 10 visible positions, blocks of 4: block scores max = {5, 9, 2(newest, kept)}; keep 2 blocks.
  const float s[10] = {1, 5, 0, 2, 9, 3, 1, 0, 2, 1};
  std::vector<uint8_t> keep;
  candidate_mask(s, 10, 4, 2, &keep);
  const std::vector<uint8_t> want = {0, 0, 0, 0, 1, 1, 1, 1, 1, 1};
  EXPECT_EQ(keep, want);
  std::vector<int32_t> sel;
  select_topk(s, keep.data(), 10, 3, &sel);
  EXPECT_EQ(sel, (std::vector<int32_t>{4, 5, 8}));  // 9, 3, then 2 (pos 8) beats 1s; 5 at pos 1 masked
  select_topk(s, nullptr, 10, 3, &sel);
  EXPECT_EQ(sel, (std::vector<int32_t>{1, 4, 5}));
  select_topk(s, keep.data(), 10, 16, &sel);  // k >= lens: everything visible, masked or not
  EXPECT_EQ(sel.size(), 10u);
  // Brute force on random scores: the selection is the k best (mask -> -inf).
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> ud(-1, 1);
  for (int it = 0; it < 50; ++it) {
    const int n = 1 + it * 3;
    std::vector<float> r(n);
    for (float& f : r) f = ud(rng);
    candidate_mask(r.data(), n, 4, 3, &keep);
    EXPECT_TRUE(keep[n - 1]);  // the newest block is always kept
    int kept = 0;
    for (uint8_t k : keep) kept += k;
    EXPECT_LE(kept, 12);
    select_topk(r.data(), keep.data(), n, 5, &sel);
    EXPECT_EQ(sel.size(), static_cast<size_t>(std::min(5, n)));
    float worst_in = std::numeric_limits<float>::infinity();
    for (int32_t i : sel) worst_in = std::min(worst_in, keep[i] ? r[i] : -INFINITY);
    for (int i = 0; i < n; ++i) {
      if (std::find(sel.begin(), sel.end(), i) == sel.end() && keep[i]) {
        EXPECT_LE(r[i], worst_in);
      }
    }
  }
}

// Ties at the top-k boundary go the way torch.topk on CPU sends them (v41_select.h), not to the
// lowest positions: the reference's prefill and decode agree on such rows, so the choice is
// observable (sparse/s160 left prefill.f32 at its exact tie at row 46 with lowest-position-wins).
TEST(V41Select, TiesFollowTorchTopK) {
  const float I = -INFINITY;
  std::vector<int32_t> sel;
  const float a[5] = {0.9f, I, 0.8f, 0.7f, 0.7f};
  torch_topk(a, 5, 3, &sel);
  EXPECT_EQ(sel, (std::vector<int32_t>{0, 2, 4}));
  const float flat[6] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
  torch_topk(flat, 6, 3, &sel);
  EXPECT_EQ(sel, (std::vector<int32_t>{3, 4, 5}));
  // The layer-5 row of position 14 in the held-out-shaped case (sparse weights, window 4,
  // index_topk 3, candidate blocks of 2, top 4; V41SmallWindow): 0.789062 at 4 and at 11 tie for
  // the third place inside the candidates (masked positions -inf); torch keeps 11.
  const float s14[15] = {0.90625f,   -0.466797f, 0.757812f,   0.859375f,  0.789062f,
                         0.804688f,  1.36719f,   0.00878906f, 0.796875f,  0.135742f,
                         -0.195312f, 0.789062f,  1.91406f,    0.0732422f, -0.361328f};
  const uint8_t cand[15] = {1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1};
  select_topk(s14, cand, 15, 3, &sel);
  EXPECT_EQ(sel, (std::vector<int32_t>{0, 5, 11}));
  // k * 64 <= n: ATen's partial_sort branch; still the k best.
  std::vector<float> big(200, 0.0f);
  big[7] = 2.0f;
  big[150] = 1.0f;
  torch_topk(big.data(), 200, 3, &sel);
  ASSERT_EQ(sel.size(), 3u);
  EXPECT_TRUE(std::find(sel.begin(), sel.end(), 7) != sel.end());
  EXPECT_TRUE(std::find(sel.begin(), sel.end(), 150) != sel.end());
  torch_topk(a, 5, 9, &sel);  // k > n: all
  EXPECT_EQ(sel.size(), 5u);
}

// Bad input: copies of a fixture model with one thing broken.
class V41BadLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    auto root = ::strata::testing::fixtures_v41_dir();
    if (!root) {
      if (::strata::testing::running_in_ci()) FAIL() << "fixtures-v41 not found";
      GTEST_SKIP() << "fixtures-v41 not found";
    }
    src_ = *root + "/wide";
    dir_ = std::filesystem::temp_directory_path() / ("v41_bad_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    for (const char* f : {"config.json", "engram_meta.json", "model.safetensors"})
      std::filesystem::copy_file(src_ + "/" + f, dir_ / f);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string read(const char* f) {
    std::ifstream in(dir_ / f, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void write(const char* f, const std::string& s) {
    std::filesystem::remove(dir_ / f);
    std::ofstream(dir_ / f, std::ios::binary) << s;
  }
  std::string src_;
  std::filesystem::path dir_;
};

TEST_F(V41BadLoad, LoadsIntact) {
  auto m = load_deepseek_v41_dir(dir_.string());
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->arch->hparams().arch, "deepseek_v41");
}

TEST_F(V41BadLoad, WrongDtypeNamesTensor) {
  std::string s = read("model.safetensors");
  const std::string key = "\"layers.2.attn.wkv.weight\": {\"dtype\": \"BF16\"";
  auto p = s.find(key);
  ASSERT_NE(p, std::string::npos);
  s.replace(p + key.size() - 6, 6, "\"F16\" ");
  write("model.safetensors", s);
  auto m = load_deepseek_v41_dir(dir_.string());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("layers.2.attn.wkv.weight"), std::string::npos) << m.message();
  EXPECT_NE(m.message().find("expected BF16"), std::string::npos) << m.message();
  EXPECT_NE(m.message().find("got F16"), std::string::npos) << m.message();
}

TEST_F(V41BadLoad, WrongShapeNamesTensor) {
  // Same byte size (the file stays valid safetensors), wrong geometry for the model.
  std::string s = read("model.safetensors");
  const std::string key = "\"layers.2.attn.wkv.weight\": {\"dtype\": \"BF16\", \"shape\": [128, 128]";
  auto p = s.find(key);
  ASSERT_NE(p, std::string::npos);
  s.replace(p + key.size() - 10, 10, "[64, 256] ");
  write("model.safetensors", s);
  auto m = load_deepseek_v41_dir(dir_.string());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("layers.2.attn.wkv.weight"), std::string::npos) << m.message();
  EXPECT_NE(m.message().find("model.safetensors"), std::string::npos) << m.message();
  EXPECT_NE(m.message().find("128"), std::string::npos) << m.message();
}

TEST_F(V41BadLoad, MissingTensor) {
  std::string s = read("model.safetensors");
  const std::string key = "\"layers.1.ffn.gate.bias\"";
  auto p = s.find(key);
  ASSERT_NE(p, std::string::npos);
  s[p + 10] = 'X';  // rename: layers.1.fXn...
  write("model.safetensors", s);
  auto m = load_deepseek_v41_dir(dir_.string());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("layers.1.ffn.gate.bias' is missing"), std::string::npos) << m.message();
}

TEST_F(V41BadLoad, EngramMetaMismatch) {
  std::string s = read("engram_meta.json");
  const std::string key = "\"primes\": [[[67";
  auto p = s.find(key);
  ASSERT_NE(p, std::string::npos) << s.substr(0, 80);
  s.replace(p + key.size() - 2, 2, "61");
  write("engram_meta.json", s);
  auto m = load_deepseek_v41_dir(dir_.string());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("engram_meta.json"), std::string::npos) << m.message();
}

TEST_F(V41BadLoad, MissingEngramMeta) {
  std::filesystem::remove(dir_ / "engram_meta.json");
  auto m = load_deepseek_v41_dir(dir_.string());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("engram_meta.json"), std::string::npos) << m.message();
}

}  // namespace
}  // namespace strata::v41
