// runtime/imatrix_collect: Σx² per input column through the engine (kernels/activation_tap.h):
// every matmul weight of a synth MoE model gets an entry, expert banks per expert with counts that
// add up to tokens · k, matrices fed the same input (q/k/v, gate/up) get the same sums, output is
// left out unless asked for, a short text is refused, and the file round-trips.
#include "runtime/imatrix_collect.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <numeric>
#include <string>

#include "kernels/activation_tap.h"
#include "model/model.h"
#include "model/synth.h"

namespace {

namespace fs = std::filesystem;

const char* kText =
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in "
    "want of a wife. However little known the feelings or views of such a man may be on his first entering a "
    "neighbourhood, this truth is so well fixed in the minds of the surrounding families, that he is "
    "considered the rightful property of some one or other of their daughters.";

class ImatrixCollect : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("strata_imatrix_test_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    strata::SynthSpec s;
    s.n_layer = 2;
    s.n_embd = 64;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.expert_ffn = 64;
    s.n_vocab = 300;
    s.type = "q8_0";
    s.seed = 9;
    ASSERT_TRUE(strata::synth_write(s, path()).ok());
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string path() { return (dir_ / "m.gguf").string(); }
  static inline fs::path dir_;
};

double total(const std::vector<float>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0);
}

TEST_F(ImatrixCollect, EveryMatmulWeightPerExpert) {
  strata::LoadOptions lo;
  lo.n_threads = 2;
  auto model = strata::Model::load(path(), lo);
  ASSERT_TRUE(model.ok()) << model.message();
  strata::ImatrixCollectOptions o;
  o.n_ctx = 16;
  o.dataset = "pride.txt";
  auto m = strata::collect_imatrix(**model, kText, o);
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(strata::activation_tap(), nullptr);  // cleared after the run
  ASSERT_GT(m->chunk_count, 0u);
  EXPECT_EQ(m->chunk_size, 16u);
  EXPECT_EQ(m->datasets, std::vector<std::string>{"pride.txt"});
  const double tokens = 16.0 * m->chunk_count;
  EXPECT_EQ(m->entries.count("output.weight"), 0u);
  for (int l = 0; l < 2; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const auto& q = m->entries.at(b + "attn_q.weight");
    EXPECT_EQ(q.n_per_row, 64);
    EXPECT_EQ(q.counts, std::vector<float>{static_cast<float>(tokens)});
    EXPECT_EQ(m->entries.at(b + "attn_k.weight").sum2, q.sum2);  // same input as q
    EXPECT_EQ(m->entries.at(b + "attn_v.weight").sum2, q.sum2);
    EXPECT_GT(total(q.sum2), 0.0);
    const auto& up = m->entries.at(b + "ffn_up_exps.weight");
    const auto& gate = m->entries.at(b + "ffn_gate_exps.weight");
    const auto& down = m->entries.at(b + "ffn_down_exps.weight");
    EXPECT_EQ(up.n_mat(), 8);
    EXPECT_EQ(total(up.counts), 2 * tokens);  // top-2: every token reaches two experts
    EXPECT_EQ(up.sum2, gate.sum2);
    EXPECT_EQ(down.n_per_row, 64);
    EXPECT_EQ(down.counts, up.counts);
    EXPECT_GT(total(down.sum2), 0.0);
    EXPECT_EQ(m->entries.count(b + "ffn_gate_inp.weight"), 1u);  // the router is a matmul too
  }
  o.process_output = true;
  auto with_output = strata::collect_imatrix(**model, kText, o);
  ASSERT_TRUE(with_output.ok());
  EXPECT_EQ(with_output->entries.count("output.weight"), 1u);
  EXPECT_EQ(with_output->entries.at("blk.1.attn_q.weight").sum2, m->entries.at("blk.1.attn_q.weight").sum2);

  const std::string out = (dir_ / "imatrix.gguf").string();
  ASSERT_TRUE(strata::write_imatrix(*m, out).ok());
  auto back = strata::read_imatrix(out);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->entries.size(), m->entries.size());
}

TEST_F(ImatrixCollect, TextShorterThanOneChunkIsAnError) {
  auto model = strata::Model::load(path(), {});
  ASSERT_TRUE(model.ok());
  strata::ImatrixCollectOptions o;
  o.n_ctx = 512;
  auto m = strata::collect_imatrix(**model, "too short", o);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("fewer than one chunk of 512"), std::string::npos) << m.message();
}

}  // namespace
