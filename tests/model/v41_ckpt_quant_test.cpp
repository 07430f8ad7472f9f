// The official checkpoint's FP8 (block-scaled E4M3) and FP4 (MXFP4) weight encodings: the
// decoders against independent bit-level formulas, their errors, and a whole-model check that a
// checkpoint holding FP8 / FP4 tensors gives the same logits, to the bit, as the same values in BF16.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "base/thread_pool.h"
#include "common/fixtures.h"
#include "format/safetensors.h"
#include "format/safetensors_writer.h"
#include "model/deepseek_v41/v41_arch.h"
#include "model/deepseek_v41/v41_ckpt_quant.h"
#include "quant/qtypes.h"
#include "quant/quant_ref.h"

namespace strata {
namespace {

// Independent decodes, written from the format definitions.
float ref_e4m3(uint8_t b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  const float mag = e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(1.0f + m / 8.0f, e - 7);
  return s ? -mag : mag;
}
float ref_e2m1(uint8_t nib) {
  const int s = nib >> 3, e = (nib >> 1) & 3, m = nib & 1;
  const float mag = e == 0 ? 0.5f * m : std::ldexp(1.0f + 0.5f * m, e - 1);
  return s ? -mag : mag;
}
float ref_ue8m0(uint8_t b) {
  return std::ldexp(1.0f, b - 127);
}

StTensor tensor(const char* name, StDtype t, std::vector<int64_t> shape, const std::vector<uint8_t>& bytes) {
  StTensor x;
  x.name = name;
  x.dtype = t;
  x.shape = std::move(shape);
  x.data = bytes.data();
  x.nbytes = bytes.size();
  return x;
}

uint8_t e4m3_code(std::mt19937& g) {  // any finite code (0x7f / 0xff are NaN)
  for (;;) {
    const uint8_t b = static_cast<uint8_t>(g());
    if ((b & 0x7f) != 0x7f) return b;
  }
}

TEST(V41CkptQuant, ScaleNames) {
  EXPECT_EQ(v41::scale_name_of("layers.0.attn.wq_a.weight"), "layers.0.attn.wq_a.scale");
  EXPECT_EQ(v41::scale_name_of("head"), "head.scale");
}

TEST(V41CkptQuant, Fp8BlocksMatchTheFormat) {
  const int64_t out = 5, in = 7;
  const int br = 2, bc = 4;  // partial blocks on both edges: scale [3, 2]
  std::mt19937 g(7);
  std::vector<uint8_t> w(out * in), s(3 * 2);
  for (auto& b : w) b = e4m3_code(g);
  for (auto& b : s) b = static_cast<uint8_t>(120 + g() % 12);
  const StTensor tw = tensor("x.weight", StDtype::f8_e4m3, {out, in}, w);
  const StTensor ts = tensor("x.scale", StDtype::f8_e8m0, {3, 2}, s);
  std::vector<float> got;
  ASSERT_TRUE(v41::dequant_fp8_blocks(tw, ts, out, in, br, bc, "t", &got).ok());
  for (int64_t r = 0; r < out; ++r)
    for (int64_t c = 0; c < in; ++c)
      ASSERT_EQ(got[r * in + c], ref_e4m3(w[r * in + c]) * ref_ue8m0(s[(r / br) * 2 + c / bc]))
          << r << "," << c;

  const StTensor bad = tensor("x.scale", StDtype::f8_e8m0, {2, 3}, s);
  auto st = v41::dequant_fp8_blocks(tw, bad, out, in, br, bc, "t", &got);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("x.scale"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("expected F8_E8M0 [3, 2]"), std::string::npos) << st.message();
}

TEST(V41CkptQuant, Fp4IsMxfp4LowNibbleFirst) {
  const int64_t out = 3, in = 64;
  std::mt19937 g(11);
  std::vector<uint8_t> w(out * in / 2), s(out * in / 32);
  for (auto& b : w) b = static_cast<uint8_t>(g());
  for (auto& b : s) b = static_cast<uint8_t>(118 + g() % 16);
  const StTensor tw = tensor("e.weight", StDtype::i8, {out, in / 2}, w);
  const StTensor ts = tensor("e.scale", StDtype::f8_e8m0, {out, in / 32}, s);
  std::vector<float> got;
  ASSERT_TRUE(v41::dequant_fp4_mx(tw, ts, out, in, "t", &got).ok());
  for (int64_t r = 0; r < out; ++r)
    for (int64_t c = 0; c < in; ++c) {
      const uint8_t b = w[(r * in + c) / 2];
      const float want = ref_e2m1(c % 2 ? b >> 4 : b & 15) * ref_ue8m0(s[r * (in / 32) + c / 32]);
      ASSERT_EQ(got[r * in + c], want) << r << "," << c;
    }
  // The fast path's MXFP4 blocks decode to the same values (quant/'s MXFP4 reference decoder).
  std::vector<uint8_t> mx(static_cast<size_t>(out * in / 32) * sizeof(BlockMxfp4));
  ASSERT_TRUE(v41::fp4_to_mxfp4(tw, ts, out, in, "t", mx.data()).ok());
  std::vector<float> dec(static_cast<size_t>(out * in));
  to_float_mxfp4(mx.data(), dec.data(), out * in);
  for (int64_t i = 0; i < out * in; ++i) ASSERT_EQ(dec[i], got[i]) << i;
  std::vector<uint8_t> nan_s = s;
  nan_s[1] = 0xff;
  const StTensor tn = tensor("e.scale", StDtype::f8_e8m0, {out, in / 32}, nan_s);
  const Status nst = v41::fp4_to_mxfp4(tw, tn, out, in, "t", mx.data());
  ASSERT_FALSE(nst.ok());
  EXPECT_NE(nst.message().find("NaN"), std::string::npos) << nst.message();
  auto st = v41::dequant_fp4_mx(tw, ts, out, 48, "t", &got);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("multiple of 32"), std::string::npos) << st.message();
  const StTensor f16 = tensor("e.weight", StDtype::f16, {out, in / 2}, w);
  st = v41::dequant_fp4_mx(f16, ts, out, in, "t", &got);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("expected I8 or U8"), std::string::npos) << st.message();
}

// --- whole model: BF16 checkpoint vs the same values as FP8 / FP4 tensors --------------------------
struct Entry {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

void write_safetensors(const std::filesystem::path& p, const std::vector<Entry>& es) {
  std::vector<StTensorOut> ts;
  for (const Entry& e : es) {
    StDtype t{};
    ASSERT_TRUE(st_dtype_parse(e.dtype, &t)) << e.dtype;
    ts.push_back(st_tensor_bytes(e.name, t, e.shape, e.bytes));
  }
  auto w = ::strata::write_safetensors(p.string(), ts);
  ASSERT_TRUE(w.ok()) << w.message();
}

std::vector<uint8_t> bf16_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &v[i], 4);
    EXPECT_EQ(u & 0xffff, 0u) << "value " << v[i] << " is not bf16-exact";
    const uint16_t h = static_cast<uint16_t>(u >> 16);
    std::memcpy(&b[2 * i], &h, 2);
  }
  return b;
}

TEST(V41CkptQuant, Fp8AndFp4CheckpointGiveTheBf16Logits) {
  auto root = ::strata::testing::fixtures_v41_dir();
  if (!root) {
    if (::strata::testing::running_in_ci()) FAIL() << "fixtures-v41 not found";
    GTEST_SKIP() << "fixtures-v41 not found";
  }
  const std::string src = *root + "/wide";
  auto orig = SafetensorsFile::open(src + "/model.safetensors");
  ASSERT_TRUE(orig.ok()) << orig.message();
  const std::filesystem::path base =
      std::filesystem::temp_directory_path() / ("v41_q_" + std::to_string(::getpid()));
  std::filesystem::remove_all(base);
  const std::filesystem::path dir_bf = base / "bf16", dir_q = base / "quant";
  for (const auto& d : {dir_bf, dir_q}) {
    std::filesystem::create_directories(d);
    std::filesystem::copy_file(src + "/engram_meta.json", d / "engram_meta.json");
  }
  nlohmann::json cfg;
  std::ifstream(src + "/config.json") >> cfg;
  cfg["quantization_config"] = {{"weight_block_size", {32, 32}}};
  cfg["dtype"] = "fp8";
  cfg["expert_dtype"] = "fp4";
  std::ofstream(dir_bf / "config.json") << cfg.dump();
  std::ofstream(dir_q / "config.json") << cfg.dump();

  // FP4: every routed expert's w2 of layer 3 (so the fast path stacks them as MXFP4).
  const std::string fp8_name = "layers.2.attn.wq_a.weight", fp4_prefix = "layers.3.ffn.experts.";
  auto is_fp4 = [&](const std::string& nm) {
    return nm.rfind(fp4_prefix, 0) == 0 && nm.size() > 10 &&
           nm.compare(nm.size() - 10, 10, ".w2.weight") == 0;
  };
  std::mt19937 g(3);
  std::vector<Entry> bf, q;
  for (const StTensor& t : orig.value()->tensors()) {
    Entry e{t.name, st_dtype_name(t.dtype), t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes)};
    if (t.name != fp8_name && !is_fp4(t.name)) {
      bf.push_back(e);
      q.push_back(e);
      continue;
    }
    ASSERT_EQ(t.shape.size(), 2u);
    const int64_t out = t.shape[0], in = t.shape[1];
    std::vector<float> vals(static_cast<size_t>(out * in));
    if (t.name == fp8_name) {  // E4M3 codes, one UE8M0 per 32x32 tile
      const int64_t sr = (out + 31) / 32, sc = (in + 31) / 32;
      Entry w{t.name, "F8_E4M3", {out, in}, std::vector<uint8_t>(out * in)};
      Entry s{v41::scale_name_of(t.name), "F8_E8M0", {sr, sc}, std::vector<uint8_t>(sr * sc)};
      for (auto& b : s.bytes) b = static_cast<uint8_t>(118 + g() % 6);
      for (int64_t i = 0; i < out * in; ++i) {
        w.bytes[i] = e4m3_code(g);
        vals[i] = ref_e4m3(w.bytes[i]) * ref_ue8m0(s.bytes[(i / in / 32) * sc + (i % in) / 32]);
      }
      q.push_back(w);
      q.push_back(s);
    } else {  // E2M1 pairs + per-32 UE8M0
      Entry w{t.name, "I8", {out, in / 2}, std::vector<uint8_t>(out * in / 2)};
      Entry s{v41::scale_name_of(t.name), "F8_E8M0", {out, in / 32}, std::vector<uint8_t>(out * in / 32)};
      for (auto& b : w.bytes) b = static_cast<uint8_t>(g());
      for (auto& b : s.bytes) b = static_cast<uint8_t>(120 + g() % 6);
      for (int64_t i = 0; i < out * in; ++i) {
        const uint8_t b = w.bytes[i / 2];
        vals[i] = ref_e2m1(i % 2 ? b >> 4 : b & 15) * ref_ue8m0(s.bytes[i / 32]);
      }
      q.push_back(w);
      q.push_back(s);
    }
    bf.push_back(Entry{t.name, "BF16", t.shape, bf16_bytes(vals)});
  }
  write_safetensors(dir_bf / "model.safetensors", bf);
  write_safetensors(dir_q / "model.safetensors", q);

  const std::vector<int32_t> toks = {5, 17, 200, 3, 99, 42, 7, 128, 64, 1, 250, 33};
  const int n = static_cast<int>(toks.size());
  std::vector<std::vector<float>> logits;
  uint64_t fast_bytes[2] = {0, 0};
  std::vector<uint8_t> wq_a_bf;
  // Oracle: the BF16 and the FP8 / FP4 checkpoint give the same bits. Fast: the FP8 matrix becomes
  // BF16 (lossless, the same logits as the BF16 checkpoint's fast run would give for it), layer 3's
  // w2 stack stays 4-bit (MXFP4, activations as Q8_0): close to the oracle, not equal.
  for (int run = 0; run < 4; ++run) {
    const auto& d = run % 2 == 0 ? dir_bf : dir_q;
    const auto num = run < 2 ? v41::V41Numerics::oracle : v41::V41Numerics::fast;
    auto m = load_deepseek_v41_dir(d.string(), {}, num);
    ASSERT_TRUE(m.ok()) << m.message();
    if (run >= 2) {
      fast_bytes[run - 2] = m->model->w.bytes;
      const TensorView& w2 = m->model->w.layers[3].xw2.tv;
      EXPECT_EQ(w2.type, run == 3 ? GgmlType::mxfp4 : GgmlType::bf16);
      // FP8 -> BF16 at load is lossless: the same bytes as the BF16 checkpoint's.
      EXPECT_EQ(m->model->w.layers[2].wq_a.tv.type, GgmlType::bf16);
      if (run == 2) wq_a_bf = m->model->w.layers[2].wq_a.bytes;
      if (run == 3) {
        EXPECT_EQ(m->model->w.layers[2].wq_a.bytes, wq_a_bf);
      }
    }
    const Architecture& arch = *m->arch;
    ThreadPool pool(1);
    auto st = arch.new_state({.n_ctx = n, .n_batch = n, .n_threads = 1});
    ASSERT_TRUE(st.ok());
    std::vector<float> l(static_cast<size_t>(n) * arch.hparams().n_vocab);
    ASSERT_TRUE(forward_one(arch, *st.value(), std::span<const int32_t>(toks), 0, true, l.data(), pool).ok());
    logits.push_back(std::move(l));
  }
  EXPECT_EQ(logits[0], logits[1]);
  EXPECT_LT(fast_bytes[1], fast_bytes[0]);  // 4.25 bits per weight instead of 16 for that stack
  float fast_vs_oracle = 0;
  for (size_t i = 0; i < logits[1].size(); ++i)
    fast_vs_oracle = std::max(fast_vs_oracle, std::fabs(logits[3][i] - logits[1][i]));
  std::printf("[v41 fp4] fast (MXFP4 experts) vs oracle: max |d| %.3g over %d rows\n", fast_vs_oracle, n);
  EXPECT_LT(fast_vs_oracle, 4.0f);
  EXPECT_TRUE(std::all_of(logits[3].begin(), logits[3].end(), [](float v) { return std::isfinite(v); }));

  // The FP8 weight without its scale tensor: an error naming both.
  q.erase(std::remove_if(q.begin(), q.end(),
                         [&](const Entry& e) { return e.name == v41::scale_name_of(fp8_name); }),
          q.end());
  write_safetensors(dir_q / "model.safetensors", q);
  auto m = load_deepseek_v41_dir(dir_q.string());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find(fp8_name), std::string::npos) << m.message();
  EXPECT_NE(m.message().find("which is missing"), std::string::npos) << m.message();
  std::filesystem::remove_all(base);
}

}  // namespace
}  // namespace strata
