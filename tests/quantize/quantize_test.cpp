// quantize/: llama-quantize's type rules per file type, the converted bytes equal to quant/'s
// weight quantizers of the source values, and bad input refused before any output is written.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "base/fp16.h"
#include "format/gguf.h"
#include "quant/quant_ref.h"
#include "quant/weight_quant.h"
#include "quantize/quantize_gguf.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

// One source tensor: name, type, ne, and its values (stored in `type`).
struct Src {
  std::string name;
  GgmlType type;
  std::vector<int64_t> ne;
};

// A small qwen3moe-named model: F16 matrices, F32 norms / router, a 3-D expert bank, an output
// of 256 columns (Q6_K fits), a matrix of 64 columns (Q6_K does not: falls back to Q8_0) and one
// of 48 (no 32-block fits: F16).
std::vector<Src> model_tensors() {
  return {
      {"token_embd.weight", GgmlType::f16, {64, 40}},
      {"output.weight", GgmlType::f32, {256, 8}},
      {"output_norm.weight", GgmlType::f32, {64}},
      {"blk.0.attn_norm.weight", GgmlType::f32, {64}},
      {"blk.0.attn_q.weight", GgmlType::f16, {64, 64}},
      {"blk.0.attn_v.weight", GgmlType::bf16, {64, 32}},
      {"blk.0.attn_output.weight", GgmlType::f16, {48, 64}},
      {"blk.0.ffn_gate_inp.weight", GgmlType::f32, {64, 4}},
      {"blk.0.ffn_up_exps.weight", GgmlType::f16, {64, 32, 4}},
      {"blk.0.ffn_down_exps.weight", GgmlType::f32, {32, 64, 4}},
      {"blk.1.attn_k.weight", GgmlType::f16, {64, 32}},
      {"blk.1.col.weight", GgmlType::f16, {64, 1}},  // 1-D in ggml's sense
  };
}

class Quantize : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("strata_quantize_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes the model (values N(0, 1), seeded) with the given tensors and expert count.
  std::string write_model(const std::vector<Src>& ts, int n_expert = 4, float poison = 0.0f) {
    GgufWriter w;
    w.set_string("general.architecture", "qwen3moe");
    w.set_u32("qwen3moe.block_count", 2);
    w.set_u32("qwen3moe.expert_count", static_cast<uint32_t>(n_expert));
    w.set_u32("general.file_type", 1);
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    data_.clear();
    data_.reserve(ts.size());
    for (const Src& t : ts) {
      int64_t n = 1;
      for (int64_t x : t.ne) n *= x;
      std::vector<float> v(static_cast<size_t>(n));
      for (float& x : v) x = nd(rng);
      if (poison != 0.0f && t.name == "blk.0.attn_q.weight") v[5] = poison;
      std::vector<uint8_t> bytes(row_bytes(t.type, t.ne[0]) * static_cast<size_t>(n / t.ne[0]));
      const QuantRef* r = quant_ref(t.type);
      if (r && r->from_float) {
        for (int64_t row = 0; row < n / t.ne[0]; ++row)
          r->from_float(v.data() + row * t.ne[0], bytes.data() + row * row_bytes(t.type, t.ne[0]), t.ne[0]);
      }
      data_.push_back(std::move(bytes));
      EXPECT_TRUE(w.add_tensor(t.name, t.type, t.ne, data_.back().data()).ok());
    }
    const std::string path = (dir_ / "in.gguf").string();
    EXPECT_TRUE(w.write(path).ok());
    return path;
  }

  QuantizeOptions opts(const char* ftype) {
    QuantizeOptions o;
    o.policy.ftype = quant_ftype(ftype);
    EXPECT_NE(o.policy.ftype, nullptr) << ftype;
    o.n_threads = 2;
    return o;
  }

  // Quantizes `in` and returns name -> type of the output; checks every tensor's bytes against
  // the weight quantizer of its type applied to the dequantized source (or a copy).
  std::map<std::string, GgmlType> quantize(const std::string& in, const QuantizeOptions& o) {
    auto src = GgufFile::open(in);
    EXPECT_TRUE(src.ok()) << src.message();
    auto plan = plan_quantize(**src, o);
    EXPECT_TRUE(plan.ok()) << plan.message();
    const std::string out = (dir_ / "out.gguf").string();
    Status st = write_quantized(**src, *plan, o, out);
    EXPECT_TRUE(st.ok()) << st.message();
    auto q = GgufFile::open(out);
    EXPECT_TRUE(q.ok()) << q.message();
    std::map<std::string, GgmlType> types;
    for (const TensorView& t : (*q)->tensors()) {
      types[t.name] = t.type;
      const TensorView* s = (*src)->find_tensor(t.name);
      EXPECT_NE(s, nullptr) << t.name;
      for (int d = 0; d < kMaxDims; ++d) EXPECT_EQ(t.ne[d], s->ne[d]) << t.name;
      std::vector<uint8_t> want(t.nbytes);
      if (t.type == s->type) {
        std::memcpy(want.data(), s->data, s->nbytes);
      } else {
        const int64_t n = t.ne[0];
        std::vector<float> row(static_cast<size_t>(n));
        for (int64_t r = 0; r < t.rows(); ++r) {
          quant_ref(s->type)->to_float(static_cast<const uint8_t*>(s->data) + r * s->row_size(), row.data(),
                                       n);
          weight_quantizer(t.type)(row.data(), want.data() + r * t.row_size(), n);
        }
      }
      EXPECT_EQ(std::memcmp(want.data(), t.data, t.nbytes), 0) << t.name << " as " << type_name(t.type);
    }
    EXPECT_EQ((*q)->get_int("general.file_type").value(), o.policy.ftype->llama_ftype);
    EXPECT_EQ((*q)->get_int("general.quantization_version").value(), 2);
    return types;
  }

  fs::path dir_;
  std::vector<std::vector<uint8_t>> data_;
};

using T = GgmlType;

TEST_F(Quantize, Q8_0TypesAndBytes) {
  auto t = quantize(write_model(model_tensors()), opts("Q8_0"));
  EXPECT_EQ(t["token_embd.weight"], T::q8_0);
  EXPECT_EQ(t["output.weight"], T::q8_0);  // output stays Q8_0 for Q8_0
  EXPECT_EQ(t["output_norm.weight"], T::f32);
  EXPECT_EQ(t["blk.0.attn_q.weight"], T::q8_0);
  EXPECT_EQ(t["blk.0.attn_v.weight"], T::q8_0);
  EXPECT_EQ(t["blk.0.attn_output.weight"], T::f16);   // 48 columns: no 32-block fits
  EXPECT_EQ(t["blk.0.ffn_gate_inp.weight"], T::f32);  // the router is never converted
  EXPECT_EQ(t["blk.0.ffn_up_exps.weight"], T::q8_0);
  EXPECT_EQ(t["blk.1.col.weight"], T::f16);  // [64, 1] is 1-D: kept
}

TEST_F(Quantize, Q4_0DefaultPromotesOutputToQ6_K) {
  auto t = quantize(write_model(model_tensors()), opts("q4_0"));
  EXPECT_EQ(t["output.weight"], T::q6_k);
  EXPECT_EQ(t["token_embd.weight"], T::q4_0);  // not tied: output.weight exists
  EXPECT_EQ(t["blk.0.attn_q.weight"], T::q4_0);
  EXPECT_EQ(t["blk.0.attn_v.weight"], T::q4_0);
  EXPECT_EQ(t["blk.0.ffn_down_exps.weight"], T::q4_0);
  EXPECT_EQ(t["blk.0.attn_output.weight"], T::f16);
}

TEST_F(Quantize, Q4_0TiedEmbeddingsTakeTheOutputRule) {
  std::vector<Src> ts = model_tensors();
  ts.erase(ts.begin() + 1);                                        // no output.weight
  ts[0].ne = {256, 8};                                             // Q6_K fits the embeddings
  ts.push_back({"blk.1.attn_q.weight", GgmlType::f16, {64, 64}});  // Q6_K would not fit 64: stays Q4_0
  auto t = quantize(write_model(ts), opts("Q4_0"));
  EXPECT_EQ(t["token_embd.weight"], T::q6_k);
  EXPECT_EQ(t["blk.1.attn_q.weight"], T::q4_0);
}

TEST_F(Quantize, PureSkipsTheMix) {
  QuantizeOptions o = opts("Q4_0");
  o.policy.pure = true;
  auto t = quantize(write_model(model_tensors()), o);
  EXPECT_EQ(t["output.weight"], T::q4_0);
  EXPECT_EQ(t["token_embd.weight"], T::q4_0);
  EXPECT_EQ(t["blk.0.attn_output.weight"], T::f16);  // the fallback still applies
  EXPECT_EQ(t["output_norm.weight"], T::f32);
}

TEST_F(Quantize, Mxfp4MoeExpertsOnly) {
  auto t = quantize(write_model(model_tensors()), opts("MXFP4_MOE"));
  EXPECT_EQ(t["blk.0.ffn_up_exps.weight"], T::mxfp4);
  EXPECT_EQ(t["blk.0.ffn_down_exps.weight"], T::mxfp4);
  EXPECT_EQ(t["blk.0.attn_q.weight"], T::q8_0);
  EXPECT_EQ(t["output.weight"], T::q8_0);
  EXPECT_EQ(t["token_embd.weight"], T::q8_0);
  EXPECT_EQ(t["blk.0.ffn_gate_inp.weight"], T::f32);
}

TEST_F(Quantize, EightExpertsKeepAttentionKVInQ8_0AndQ6_KFallsBack) {
  auto t = quantize(write_model(model_tensors(), 8), opts("Q6_K"));
  EXPECT_EQ(t["blk.0.attn_v.weight"], T::q8_0);
  EXPECT_EQ(t["blk.1.attn_k.weight"], T::q8_0);
  EXPECT_EQ(t["blk.0.attn_q.weight"], T::q8_0);  // 64 columns: Q6_K -> Q8_0
  EXPECT_EQ(t["output.weight"], T::q6_k);
}

TEST_F(Quantize, OverridesAndFloatTypes) {
  QuantizeOptions o = opts("Q8_0");
  auto r1 = parse_tensor_type_rule("EXPS=mxfp4");  // lower-cased as llama-quantize does
  auto r2 = parse_tensor_type_rule("attn_.*=q4_0");
  ASSERT_TRUE(r1.ok() && r2.ok());
  o.policy.tensor_types = {*r1, *r2};
  o.policy.output_type = T::f16;
  o.policy.token_embd_type = T::q4_0;
  auto t = quantize(write_model(model_tensors()), o);
  EXPECT_EQ(t["blk.0.ffn_up_exps.weight"], T::mxfp4);
  EXPECT_EQ(t["blk.0.attn_q.weight"], T::q4_0);
  EXPECT_EQ(t["blk.0.attn_output.weight"], T::f16);  // matched, then fell back
  EXPECT_EQ(t["output.weight"], T::f16);
  EXPECT_EQ(t["token_embd.weight"], T::q4_0);
  auto f = quantize(write_model(model_tensors()), opts("BF16"));
  EXPECT_EQ(f["blk.0.attn_q.weight"], T::bf16);
  EXPECT_EQ(f["blk.0.attn_output.weight"], T::bf16);  // float types have no block
  EXPECT_EQ(f["output_norm.weight"], T::f32);
}

TEST_F(Quantize, RequantizeNeedsTheFlag) {
  std::vector<Src> ts = {{"blk.0.attn_q.weight", GgmlType::q8_0, {64, 64}}};
  const std::string in = write_model(ts);
  auto src = GgufFile::open(in);
  ASSERT_TRUE(src.ok());
  auto p = plan_quantize(**src, opts("Q4_0"));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.message().find("blk.0.attn_q.weight: requantizing from type q8_0"), std::string::npos)
      << p.message();
  EXPECT_TRUE(plan_quantize(**src, opts("Q8_0")).ok());  // same type: copied
  QuantizeOptions o = opts("Q4_0");
  o.allow_requantize = true;
  EXPECT_EQ(quantize(in, o)["blk.0.attn_q.weight"], T::q4_0);
}

TEST_F(Quantize, BadInputNamesTheTensorAndWritesNothing) {
  std::vector<Src> ts = model_tensors();
  ts.push_back({"blk.1.ids.weight", GgmlType::i32, {64, 2}});
  auto src = GgufFile::open(write_model(ts));
  ASSERT_TRUE(src.ok());
  auto p = plan_quantize(**src, opts("Q8_0"));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.message().find("blk.1.ids.weight: cannot convert from type i32"), std::string::npos)
      << p.message();

  QuantizeOptions o = opts("Q8_0");
  o.policy.output_type = T::q4_0;
  std::vector<Src> odd = {{"output.weight", GgmlType::f32, {48, 4}}};
  auto s2 = GgufFile::open(write_model(odd));
  ASSERT_TRUE(s2.ok());
  auto p2 = plan_quantize(**s2, o);
  ASSERT_FALSE(p2.ok());
  EXPECT_NE(p2.message().find("output.weight: rows of 48 elements are not a multiple of q4_0"),
            std::string::npos)
      << p2.message();

  auto s3 = GgufFile::open(write_model(model_tensors(), 4, INFINITY));
  ASSERT_TRUE(s3.ok());
  auto p3 = plan_quantize(**s3, opts("Q8_0"));
  ASSERT_TRUE(p3.ok());
  const std::string out = (dir_ / "never.gguf").string();
  Status st = write_quantized(**s3, *p3, opts("Q8_0"), out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("blk.0.attn_q.weight: row 0 holds a non-finite value"), std::string::npos)
      << st.message();
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".tmp"));
}

TEST(QuantizeRules, ParseErrors) {
  EXPECT_NE(parse_tensor_type_rule("attn_q").message().find("expected REGEX=TYPE"), std::string::npos);
  EXPECT_NE(parse_tensor_type_rule("=q8_0").message().find("missing the tensor name pattern"),
            std::string::npos);
  EXPECT_NE(parse_tensor_type_rule("attn=").message().find("missing the type"), std::string::npos);
  EXPECT_NE(parse_tensor_type_rule("attn=q9_9").message().find("unknown type 'q9_9'"), std::string::npos);
  EXPECT_NE(parse_tensor_type_rule("attn(=q8_0").message().find("bad regex 'attn('"), std::string::npos);
  EXPECT_EQ(quant_ftype("q3_k_m"), nullptr);
  ASSERT_NE(quant_ftype("q4_k_m"), nullptr);
  ASSERT_NE(quant_ftype("38"), nullptr);  // llama_ftype numbers work too
  EXPECT_STREQ(quant_ftype("38")->name, "MXFP4_MOE");
}

TEST(QuantizeRules, MoeFfnTensorNeedsALayer) {
  TypePolicy p;
  p.ftype = quant_ftype("Q8_0");
  PolicyModel m{"qwen3moe", 2, 4, true};
  const int64_t ne[4] = {64, 64, 1, 1};
  TypeCounters tc;
  auto c = choose_tensor_type(p, m, "ffn_down.weight", T::f16, ne, &tc);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("cannot determine the layer of tensor ffn_down.weight"), std::string::npos);
  EXPECT_FALSE(choose_tensor_type(p, m, "blk.5.ffn_down.weight", T::f16, ne, &tc).ok());
  EXPECT_TRUE(choose_tensor_type(p, m, "blk.1.ffn_down.weight", T::f16, ne, &tc).ok());
}

// Weight quantizers: Q8_0 rounds half away from zero against 1/d (not the activation path's
// 127/amax and round-half-even); Q6_K's scale search fits better than the simple absmax fit.
TEST(WeightQuant, Q8_0RoundsHalfAwayFromZero) {
  float x[32] = {};
  x[0] = 127.0f;  // d = 1
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 3.5f;
  BlockQ8_0 b;
  quantize_weights_q8_0(x, &b, 32);
  EXPECT_EQ(fp16_to_f32(b.d), 1.0f);
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], 3);
  EXPECT_EQ(b.qs[2], -3);
  EXPECT_EQ(b.qs[3], 4);
  BlockQ8_0 a;
  from_float_q8_0(x, &a, 32);
  EXPECT_EQ(a.qs[1], 2);  // the activation quantizer rounds half to even
}

TEST(WeightQuant, Q6_KSearchBeatsTheSimpleFit) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(QK_K * 8), y(x.size());
  for (float& v : x) v = nd(rng) * nd(rng);  // heavy tails
  std::vector<BlockQ6_K> a(8), b(8);
  quantize_weights_q6_k(x.data(), a.data(), static_cast<int64_t>(x.size()));
  from_float_q6_k(x.data(), b.data(), static_cast<int64_t>(x.size()));
  auto err = [&](const std::vector<BlockQ6_K>& q) {
    to_float_q6_k(q.data(), y.data(), static_cast<int64_t>(y.size()));
    double e = 0;
    for (size_t i = 0; i < x.size(); ++i) e += (x[i] - y[i]) * (x[i] - y[i]);
    return e;
  };
  EXPECT_LT(err(a), err(b));
  std::vector<float> zero(QK_K, 0.0f);
  quantize_weights_q6_k(zero.data(), a.data(), QK_K);
  to_float_q6_k(a.data(), y.data(), QK_K);
  for (int i = 0; i < QK_K; ++i) EXPECT_EQ(y[static_cast<size_t>(i)], 0.0f);
}

}  // namespace
}  // namespace strata
