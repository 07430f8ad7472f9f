// Expert bundles: every expert's bytes in the bundle equal the GGUF's slices; co-activation order;
// the index reader rejects damaged bundles with a message naming the problem.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "memory/experts/pack.h"
#include "model/synth.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> read_range(const std::string& path, uint64_t off, uint64_t n) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(off));
  std::vector<uint8_t> v(n);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n));
  EXPECT_TRUE(in.good());
  return v;
}

class Pack : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("strata_pack_test_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    SynthSpec s;
    s.arch = "qwen3moe";
    s.n_layer = 3;
    s.n_embd = 64;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.expert_ffn = 96;  // q4_0 expert of 3 x 64 x 96: 10368 B, not a multiple of 4096
    s.n_vocab = 300;
    s.type = "q4_0";
    s.n_threads = 1;
    model_ = (dir_ / "m.gguf").string();
    auto r = synth_write(s, model_);
    ASSERT_TRUE(r.ok()) << r.message();
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string path(const char* n) { return (dir_ / n).string(); }
  static inline fs::path dir_;
  static inline std::string model_;
};

void expect_round_trip(const GgufFile& g, const PackIndex& ix) {
  ASSERT_EQ(ix.experts.size(), 3u * 8);
  for (int l = 0; l < 3; ++l) {
    for (int e = 0; e < 8; ++e) {
      const PackExpert* pe = ix.find(l, e);
      ASSERT_NE(pe, nullptr) << l << " " << e;
      EXPECT_EQ((ix.data_offset + pe->offset) % 4096, 0u);
      ASSERT_EQ(pe->parts.size(), 3u);
      EXPECT_NE(pe->parts[0].name.find("gate_exps"), std::string::npos);
      EXPECT_NE(pe->parts[1].name.find("up_exps"), std::string::npos);
      EXPECT_NE(pe->parts[2].name.find("down_exps"), std::string::npos);
      const auto blob = read_range(ix.path, ix.data_offset + pe->offset, pe->size);
      for (const PackPart& pp : pe->parts) {
        const TensorView* t = g.find_tensor(pp.name);
        ASSERT_NE(t, nullptr) << pp.name;
        const TensorView s = t->slice2d(e);
        ASSERT_EQ(pp.size, s.nbytes);
        EXPECT_EQ(pp.type, t->type);
        EXPECT_EQ(pp.ne, (std::vector<int64_t>{t->ne[0], t->ne[1]}));
        EXPECT_EQ(std::memcmp(blob.data() + pp.offset, s.data, s.nbytes), 0) << pp.name << " expert " << e;
      }
    }
  }
}

TEST_F(Pack, RoundTripByIndex) {
  auto g = GgufFile::open(model_);
  ASSERT_TRUE(g.ok());
  const std::string out = path("b.pack");
  auto w = pack_write(**g, out);
  ASSERT_TRUE(w.ok()) << w.message();
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  auto ix = pack_read_index(out);
  ASSERT_TRUE(ix.ok()) << ix.message();
  EXPECT_EQ(ix->file_size, fs::file_size(out));
  EXPECT_EQ(ix->n_layers, 3);
  EXPECT_EQ(ix->n_experts, 8);
  EXPECT_EQ(ix->source_size, (*g)->file_size());
  EXPECT_EQ(ix->order[1], (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(ix->find(1, 3)->offset, w->find(1, 3)->offset);
  EXPECT_EQ(ix->find(3, 0), nullptr);
  expect_round_trip(**g, *ix);
}

TEST_F(Pack, CoactivationOrder) {
  // Layer 0: experts 5 and 2 always together, 7 and 1 together; 5 most frequent.
  RoutingTrace t;
  t.meta = {3, 8, 2};
  auto add = [&](int64_t tok, int layer, std::vector<int32_t> ex) {
    RoutingRecord r;
    r.token_idx = tok;
    r.layer = layer;
    r.experts = std::move(ex);
    t.records.push_back(r);
  };
  for (int i = 0; i < 10; ++i) add(i, 0, {5, 2});
  for (int i = 10; i < 16; ++i) add(i, 0, {7, 1});
  for (int i = 16; i < 20; ++i) add(i, 0, {5, 7});
  const auto order = pack_coactivation_order(t, 0, 8);
  ASSERT_EQ(order.size(), 8u);
  EXPECT_EQ(std::set<int>(order.begin(), order.end()).size(), 8u);  // a permutation
  // 5 (14 requests) first, then its partner 2 (10 together); 7 (4 with 5; 10 in all) and 1 follow.
  EXPECT_EQ(order[0], 5);
  EXPECT_EQ(order[1], 2);
  EXPECT_EQ(order[2], 7);
  EXPECT_EQ(order[3], 1);
  EXPECT_EQ(std::vector<int>(order.begin() + 4, order.end()), (std::vector<int>{0, 3, 4, 6}));

  auto g = GgufFile::open(model_);
  ASSERT_TRUE(g.ok());
  PackOptions o;
  o.trace = &t;
  const std::string out = path("c.pack");
  auto w = pack_write(**g, out, o);
  ASSERT_TRUE(w.ok()) << w.message();
  auto ix = pack_read_index(out);
  ASSERT_TRUE(ix.ok()) << ix.message();
  EXPECT_EQ(ix->order[0], order);
  // Co-activated experts are neighbours on disk.
  EXPECT_EQ(ix->find(0, 2)->offset, ix->find(0, 5)->offset + ix->find(0, 5)->padded_size());
  expect_round_trip(**g, *ix);

  RoutingTrace big = t;
  big.meta.n_experts = 16;
  EXPECT_FALSE(pack_write(**g, path("d.pack"), {&big}).ok());
}

TEST_F(Pack, DamagedBundlesAreRejected) {
  auto g = GgufFile::open(model_);
  ASSERT_TRUE(g.ok());
  const std::string out = path("e.pack");
  ASSERT_TRUE(pack_write(**g, out).ok());
  auto expect_bad = [&](const std::string& p, const char* needle) {
    auto r = pack_read_index(p);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.message().find(needle), std::string::npos) << r.message();
    EXPECT_NE(r.message().find(p), std::string::npos) << r.message();
  };
  // Truncated file.
  const std::string trunc = path("trunc.pack");
  fs::copy_file(out, trunc);
  fs::resize_file(trunc, fs::file_size(out) - 4096);
  expect_bad(trunc, "truncated");
  // Bad magic.
  const std::string magic = path("magic.pack");
  fs::copy_file(out, magic);
  {
    std::fstream f(magic, std::ios::in | std::ios::out | std::ios::binary);
    f.write("XXXX", 4);
  }
  expect_bad(magic, "bad magic");
  // Corrupted index JSON.
  const std::string idx = path("idx.pack");
  fs::copy_file(out, idx);
  {
    std::fstream f(idx, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(64);
    f.write("#", 1);
  }
  expect_bad(idx, "not valid JSON");
  expect_bad(path("missing.pack"), "cannot open");
  // A model without experts.
  SynthSpec s;
  s.arch = "llama";
  s.n_layer = 1;
  s.n_embd = 64;
  s.ffn = 64;
  s.n_vocab = 300;
  s.n_threads = 1;
  const std::string dense = path("dense.gguf");
  ASSERT_TRUE(synth_write(s, dense).ok());
  auto dg = GgufFile::open(dense);
  ASSERT_TRUE(dg.ok());
  auto r = pack_write(**dg, path("dense.pack"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("no routed experts"), std::string::npos) << r.message();
}

}  // namespace
}  // namespace strata
