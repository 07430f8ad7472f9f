// quantize/: Q4_K_M / Q4_K_S mixes (llama-quantize's use_more_bits layers, fallbacks of 384-column
// rows; Q5_K_M), --policy rules by class and layer, the GGUF imatrix format, and the importance-weighted
// quantizers (never worse than the plain ones on the weighted error); Q5_0 / Q5_1 / Q5_K codecs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "quant/q5_ref.h"
#include "quant/quant_ref.h"
#include "quant/weight_quant.h"
#include "quant/weighted_quant.h"
#include "quantize/class_policy.h"
#include "quantize/imatrix_file.h"
#include "quantize/quantize_gguf.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using T = GgmlType;

class KQuant : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("strata_kquant_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A qwen3moe-shaped F16 model of 6 layers: d 256, 2 experts of ffn 384 (the bundled model's
  // shape: ffn_down rows of 384 are not a multiple of 256).
  std::string write_model() {
    GgufWriter w;
    w.set_string("general.architecture", "qwen3moe");
    w.set_u32("qwen3moe.block_count", 6);
    w.set_u32("qwen3moe.expert_count", 2);
    std::vector<std::pair<std::string, std::vector<int64_t>>> ts = {
        {"token_embd.weight", {256, 64}}, {"output.weight", {256, 64}}, {"output_norm.weight", {256}}};
    for (int l = 0; l < 6; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      ts.push_back({b + "attn_q.weight", {256, 256}});
      ts.push_back({b + "attn_k.weight", {256, 128}});
      ts.push_back({b + "attn_v.weight", {256, 128}});
      ts.push_back({b + "attn_output.weight", {256, 256}});
      ts.push_back({b + "ffn_gate_inp.weight", {256, 2}});
      ts.push_back({b + "ffn_up_exps.weight", {256, 384, 2}});
      ts.push_back({b + "ffn_down_exps.weight", {384, 256, 2}});
    }
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 0.05f);
    data_.clear();
    data_.reserve(ts.size());
    for (const auto& [name, ne] : ts) {
      int64_t n = 1;
      for (int64_t x : ne) n *= x;
      std::vector<float> v(static_cast<size_t>(n));
      for (float& x : v) x = nd(rng);
      const T t = ne.size() == 1 || name.find("gate_inp") != std::string::npos ? T::f32 : T::f16;
      std::vector<uint8_t> bytes(row_bytes(t, ne[0]) * static_cast<size_t>(n / ne[0]));
      quant_ref(t)->from_float(v.data(), bytes.data(), n);
      data_.push_back(std::move(bytes));
      EXPECT_TRUE(w.add_tensor(name, t, ne, data_.back().data()).ok());
    }
    const std::string path = (dir_ / "in.gguf").string();
    EXPECT_TRUE(w.write(path).ok());
    return path;
  }

  std::map<std::string, T> types(const std::string& in, const QuantizeOptions& o,
                                 std::string* error = nullptr) {
    auto f = GgufFile::open(in);
    EXPECT_TRUE(f.ok());
    auto plan = plan_quantize(**f, o);
    std::map<std::string, T> r;
    if (!plan.ok()) {
      if (error) *error = plan.message();
      return r;
    }
    for (const TensorPlan& tp : plan->tensors) r[tp.src->name] = tp.choice.type;
    return r;
  }

  fs::path dir_;
  std::vector<std::vector<uint8_t>> data_;
};

TEST_F(KQuant, Q4_K_MPromotesUseMoreBitsLayersAndFallsBackOn384Columns) {
  const std::string in = write_model();
  QuantizeOptions o;
  o.policy.ftype = quant_ftype("Q4_K_M");
  auto t = types(in, o);
  EXPECT_EQ(t["output.weight"], T::q6_k);
  EXPECT_EQ(t["token_embd.weight"], T::q4_k);
  EXPECT_EQ(t["blk.0.ffn_gate_inp.weight"], T::f32);
  for (int l = 0; l < 6; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const bool more = l == 2 || l == 5;  // use_more_bits(l, 6)
    EXPECT_EQ(t[b + "attn_v.weight"], more ? T::q6_k : T::q4_k) << l;
    EXPECT_EQ(t[b + "ffn_down_exps.weight"], more ? T::q8_0 : T::q5_0) << l;  // Q6_K / Q4_K fall back
    EXPECT_EQ(t[b + "attn_q.weight"], T::q4_k);
    EXPECT_EQ(t[b + "ffn_up_exps.weight"], T::q4_k);
  }
  o.policy.ftype = quant_ftype("Q5_K_M");
  t = types(in, o);
  for (int l = 0; l < 6; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const bool more = l == 2 || l == 5;
    EXPECT_EQ(t[b + "attn_v.weight"], more ? T::q6_k : T::q5_k) << l;
    EXPECT_EQ(t[b + "ffn_down_exps.weight"], more ? T::q8_0 : T::q5_1) << l;  // Q6_K / Q5_K fall back
  }
  o.policy.ftype = quant_ftype("Q4_K_S");
  t = types(in, o);
  for (int l = 0; l < 6; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    EXPECT_EQ(t[b + "attn_v.weight"], l < 4 ? T::q5_k : T::q4_k) << l;
    EXPECT_EQ(t[b + "ffn_down_exps.weight"], T::q5_0) << l;
  }
}

TEST_F(KQuant, WritesAndReadsBackEveryKQuantType) {
  const std::string in = write_model();
  for (const char* ft : {"Q4_K_M", "Q4_K_S", "Q5_K_M"}) {
    QuantizeOptions o;
    o.policy.ftype = quant_ftype(ft);
    o.n_threads = 2;
    auto f = GgufFile::open(in);
    auto plan = plan_quantize(**f, o);
    ASSERT_TRUE(plan.ok()) << plan.message();
    const std::string out = (dir_ / "out.gguf").string();
    ASSERT_TRUE(write_quantized(**f, *plan, o, out).ok());
    auto q = GgufFile::open(out);
    ASSERT_TRUE(q.ok());
    for (const TensorView& t : (*q)->tensors()) {
      const TensorView* s = (*f)->find_tensor(t.name);
      std::vector<float> a(static_cast<size_t>(t.ne[0])), b(a.size());
      quant_ref(s->type)->to_float(s->data, a.data(), t.ne[0]);
      quant_ref(t.type)->to_float(t.data, b.data(), t.ne[0]);
      double err = 0, ref = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        err += (a[i] - b[i]) * (a[i] - b[i]);
        ref += a[i] * a[i];
      }
      EXPECT_LT(err, 0.02 * ref) << ft << " " << t.name << " " << type_name(t.type);
    }
  }
}

TEST_F(KQuant, PolicyByClassAndLayer) {
  const std::string in = write_model();
  QuantizeOptions o;
  o.policy.ftype = quant_ftype("MXFP4_MOE");
  auto rules = parse_class_policy("router=f32,attn=q8_0,experts=mxfp4,layers[0,-1].experts=q8_0,output=q6_k");
  ASSERT_TRUE(rules.ok()) << rules.message();
  o.policy.class_rules = *rules;
  auto t = types(in, o);
  EXPECT_EQ(t["blk.0.ffn_up_exps.weight"], T::q8_0);
  EXPECT_EQ(t["blk.5.ffn_up_exps.weight"], T::q8_0);
  EXPECT_EQ(t["blk.3.ffn_up_exps.weight"], T::mxfp4);
  EXPECT_EQ(t["blk.3.ffn_down_exps.weight"], T::mxfp4);
  EXPECT_EQ(t["blk.3.attn_v.weight"], T::q8_0);
  EXPECT_EQ(t["blk.3.ffn_gate_inp.weight"], T::f32);
  EXPECT_EQ(t["output.weight"], T::q6_k);
  // Presets, and a layer outside the model refused before anything is written.
  o.policy.class_rules = parse_class_policy("fp4-all").value();
  t = types(in, o);
  EXPECT_EQ(t["blk.1.attn_q.weight"], T::mxfp4);
  EXPECT_EQ(t["output.weight"], T::mxfp4);
  o.policy.class_rules = parse_class_policy("layers[6].experts=q8_0").value();
  std::string e;
  EXPECT_TRUE(types(in, o, &e).empty());
  EXPECT_NE(e.find("layer 6 of class 'experts' is outside the model's 6 layers"), std::string::npos) << e;
  EXPECT_NE(parse_class_policy("mlp=q8_0").message().find("unknown tensor class 'mlp'"), std::string::npos);
  EXPECT_NE(parse_class_policy("attn=q9").message().find("unknown type 'q9'"), std::string::npos);
  EXPECT_NE(parse_class_policy("layers[x].attn=q8_0").message().find("'x' is not a layer number"),
            std::string::npos);
  EXPECT_FALSE(parse_class_policy("attn").ok());
  EXPECT_EQ(tensor_class("blk.0.ffn_down_shexp.weight"), "shexp");
  EXPECT_EQ(tensor_class("blk.0.attn_norm.weight"), "");
}

TEST_F(KQuant, ImatrixRoundTripAndWeightedQuantization) {
  Imatrix m;
  m.datasets = {"valid.txt"};
  m.chunk_count = 3;
  m.chunk_size = 64;
  ImatrixEntry e;
  e.n_per_row = 384;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.0f, 4.0f);
  e.sum2.resize(384 * 2);
  for (float& v : e.sum2) v = u(rng) * u(rng) * u(rng);
  e.counts = {10, 0};  // expert 1 never reached: quantized without weights
  m.entries["blk.1.ffn_down_exps.weight"] = e;
  const std::string path = (dir_ / "imatrix.gguf").string();
  ASSERT_TRUE(write_imatrix(m, path).ok());
  auto r = read_imatrix(path);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->datasets, m.datasets);
  EXPECT_EQ(r->chunk_count, 3u);
  EXPECT_EQ(r->chunk_size, 64u);
  ASSERT_EQ(r->entries.size(), 1u);
  EXPECT_EQ(r->entries.begin()->second.sum2, e.sum2);
  EXPECT_TRUE(r->entries.begin()->second.importance(1).empty());

  const std::string in = write_model();
  QuantizeOptions o;
  o.policy.ftype = quant_ftype("Q4_K_M");
  o.policy.has_imatrix = true;
  o.imatrix = &*r;
  auto f = GgufFile::open(in);
  auto plan = plan_quantize(**f, o);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_EQ(plan->n_weighted, 1);  // blk.1.ffn_down_exps (Q5_0)
  // The output records the imatrix under llama-quantize's keys.
  o.imatrix_file = path;
  const std::string out = (dir_ / "out.gguf").string();
  ASSERT_TRUE(write_quantized(**f, *plan, o, out).ok());
  auto q = GgufFile::open(out);
  ASSERT_TRUE(q.ok());
  auto file = (*q)->get_string_or("quantize.imatrix.file", "");
  auto dataset = (*q)->get_string_or("quantize.imatrix.dataset", "");
  auto entries = (*q)->get_int_or("quantize.imatrix.entries_count", -1);
  auto chunks = (*q)->get_int_or("quantize.imatrix.chunks_count", -1);
  ASSERT_TRUE(file.ok() && dataset.ok() && entries.ok() && chunks.ok());
  EXPECT_EQ(*file, path);
  EXPECT_EQ(*dataset, "valid.txt");
  EXPECT_EQ(*entries, 1);
  EXPECT_EQ(*chunks, 3);
  // A shape that disagrees is refused naming the tensor.
  Imatrix bad = *r;
  bad.entries["blk.0.attn_q.weight"] = e;
  o.imatrix = &bad;
  auto p2 = plan_quantize(**f, o);
  ASSERT_FALSE(p2.ok());
  EXPECT_NE(p2.message().find("blk.0.attn_q.weight"), std::string::npos);
  EXPECT_FALSE(read_imatrix(in).ok());  // a model is not an imatrix
}

// The weighted quantizers minimise Σ qw·(x − q)²: never worse than the plain quantizer on it.
TEST(WeightedQuant, BeatsThePlainQuantizerOnTheWeightedError) {
  std::mt19937 rng(11);
  std::student_t_distribution<float> st(4.0f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  const int64_t n = 1024;
  std::vector<float> x(n), qw(n), y(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = 0.02f * st(rng);
    qw[i] = u(rng) < 0.1f ? 50.0f : u(rng);
  }
  for (T t : {T::q4_0, T::q5_0, T::q5_1, T::q4_k, T::q5_k, T::q6_k, T::mxfp4}) {
    std::vector<uint8_t> a(row_bytes(t, n)), b(a.size());
    weight_quantizer(t)(x.data(), a.data(), n);
    weighted_quantizer(t)(x.data(), b.data(), n, qw.data());
    auto werr = [&](const std::vector<uint8_t>& q) {
      quant_ref(t)->to_float(q.data(), y.data(), n);
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += qw[i] * (x[i] - y[i]) * (x[i] - y[i]);
      return s;
    };
    EXPECT_LT(werr(b), werr(a)) << type_name(t);
  }
}

// Q5_0 / Q5_1 / Q5_K: round trip and the scalar dot equal to the dot of the dequantized rows.
TEST(Q5Types, RoundTripAndDot) {
  std::mt19937 rng(2);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t n = 512;
  std::vector<float> x(n), a(n), y(n), b(n);
  for (float& v : x) v = nd(rng);
  for (float& v : a) v = nd(rng);
  for (T t : {T::q5_0, T::q5_1, T::q5_k}) {
    const QuantRef* r = quant_ref(t);
    ASSERT_NE(r, nullptr);
    std::vector<uint8_t> q(row_bytes(t, n)), aq(row_bytes(r->vec_dot_type, n));
    r->from_float(x.data(), q.data(), n);
    r->to_float(q.data(), y.data(), n);
    double err = 0, ref = 0;
    for (int64_t i = 0; i < n; ++i) {
      err += (x[i] - y[i]) * (x[i] - y[i]);
      ref += x[i] * x[i];
    }
    EXPECT_LT(err, 0.004 * ref) << type_name(t);
    quant_ref(r->vec_dot_type)->from_float(a.data(), aq.data(), n);
    quant_ref(r->vec_dot_type)->to_float(aq.data(), b.data(), n);
    double dot = 0;
    for (int64_t i = 0; i < n; ++i) dot += double{y[i]} * b[i];
    EXPECT_NEAR(r->vec_dot(n, q.data(), aq.data()), dot, 1e-3 * std::fabs(dot) + 1e-3) << type_name(t);
  }
}

}  // namespace
}  // namespace strata
