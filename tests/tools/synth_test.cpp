// model/synth: the vocabulary is a valid byte-level BPE vocab, specs are validated with messages
// that name the flag, and files are deterministic per seed.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <unistd.h>

#include "format/gguf.h"
#include "model/synth.h"
#include "text/tokenizer.h"

namespace strata {
namespace {

TEST(SynthVocab, ValidByteLevelBpe) {
  for (int n : {259, 300, 4096, 32000}) {
    for (const char* arch : {"qwen3moe", "llama"}) {
      SynthVocab v = synth_vocab(n, arch);
      ASSERT_EQ(static_cast<int>(v.tokens.size()), n);
      ASSERT_EQ(v.types.size(), v.tokens.size());
      std::set<std::string> uniq(v.tokens.begin(), v.tokens.end());
      EXPECT_EQ(static_cast<int>(uniq.size()), n) << "duplicate token text";
      for (const auto& m : v.merges) {
        const size_t sp = m.find(' ');
        ASSERT_NE(sp, std::string::npos) << m;
        EXPECT_TRUE(uniq.count(m.substr(0, sp))) << m;
        EXPECT_TRUE(uniq.count(m.substr(sp + 1))) << m;
        EXPECT_TRUE(uniq.count(m.substr(0, sp) + m.substr(sp + 1))) << m;
      }
      EXPECT_EQ(v.tokens[static_cast<size_t>(n - 1)], "<|im_end|>");
      EXPECT_EQ(v.types[static_cast<size_t>(n - 1)], 3);
      EXPECT_EQ(v.eos, std::string(arch) == "llama" ? n - 3 : n - 1);
    }
  }
  EXPECT_EQ(synth_vocab(1000, "qwen3moe").merges, synth_vocab(1000, "qwen3moe").merges);
}

TEST(SynthVocab, EnglishTokenizesIntoWords) {
  SynthSpec s;
  s.n_expert = 2;
  s.n_expert_used = 1;
  s.expert_ffn = 32;
  s.n_layer = 1;
  s.n_vocab = 8000;
  const std::string path =
      (std::filesystem::temp_directory_path() / ("strata_synth_vocab_" + std::to_string(getpid()) + ".gguf"))
          .string();
  ASSERT_TRUE(synth_write(s, path).ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.message();
  auto tok = Tokenizer::from_gguf(**f);
  ASSERT_TRUE(tok.ok()) << tok.message();
  const std::string text = "The quick brown fox jumps over the lazy dog";
  auto ids = (*tok)->encode(text, true, true);
  EXPECT_LE(ids.size(), 12u);  // about one token per word
  EXPECT_EQ((*tok)->decode(ids), text);
  std::filesystem::remove(path);
}

TEST(SynthSpec, ValidationNamesTheFlag) {
  SynthSpec s;
  s.n_expert = 4;
  s.n_expert_used = 2;
  s.expert_ffn = 64;
  EXPECT_TRUE(synth_validate(s).ok());
  auto bad = [&](auto mutate, const char* needle) {
    SynthSpec t = s;
    mutate(t);
    Status st = synth_validate(t);
    ASSERT_FALSE(st.ok()) << needle;
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
  };
  bad([](SynthSpec& t) { t.n_expert_used = 5; }, "--top-k");
  bad([](SynthSpec& t) { t.expert_ffn = 48, t.type = "q4_0"; }, "--expert-ffn 48");
  bad([](SynthSpec& t) { t.n_head_kv = 3; }, "--kv-heads");
  bad([](SynthSpec& t) { t.n_expert = 0; }, "--experts");
  bad([](SynthSpec& t) { t.shared_ffn = 64; }, "--shared-ffn");
  bad([](SynthSpec& t) { t.arch = "qwen2moe", t.head_dim = 32; }, "--head-dim");
  bad([](SynthSpec& t) { t.router_skew = -1; }, "--router-skew");
  bad([](SynthSpec& t) { t.type = "q6_k"; }, "q6_k");
  SynthSpec dense = s;
  dense.arch = "llama";
  dense.n_expert = 0;
  dense.ffn = 96;
  EXPECT_TRUE(synth_validate(dense).ok());
}

}  // namespace
}  // namespace strata
