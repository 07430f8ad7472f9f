// `strata tokenize` and the tokenizer it uses against SentencePiece's own ids for the bundled smoke
// model (tests/data/bundled_smoke_tokenizer.json) and against llama.cpp's tokenizer test cases
// (shared fixtures vocab/*.inp/.out, vocab-only GGUFs); output formats; one-line errors.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/fixtures.h"
#include "format/gguf.h"
#include "text/tokenizer.h"

namespace {

namespace fs = std::filesystem;

using strata::testing::Proc;
using strata::testing::slurp;

void spit(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out << bytes;
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

// "[1, 2, 3]\n" -> {1, 2, 3}
std::vector<int32_t> parse_id_list(const std::string& s) {
  std::vector<int32_t> ids;
  const size_t open = s.find('['), close = s.rfind(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return {-1};
  std::string body = s.substr(open + 1, close - open - 1);
  std::replace(body.begin(), body.end(), ',', ' ');
  std::istringstream is(body);
  for (int32_t v; is >> v;) ids.push_back(v);
  return ids;
}

class TokenizeCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("strata_tokenize_test_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    const auto j = nlohmann::json::parse(slurp(data("bundled_smoke_tokenizer.json")));
    cases_.clear();
    for (const auto& c : j.at("cases"))
      cases_.push_back({c.at("text"), c.at("ids").get<std::vector<int32_t>>()});
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static std::string data(const std::string& name) {
    return strata::testing::source_dir() + "/tests/data/" + name;
  }
  static std::string model() { return data("bundled_smoke.gguf"); }
  static std::string path(const std::string& name) { return (dir_ / name).string(); }

  // Runs `strata ARGS`; ARGS must be shell-safe (texts go through files).
  static Proc strata(const std::string& args) { return strata::testing::run_strata(args, dir_); }
  // The ids the CLI prints for the exact bytes of `text` (through -f).
  static std::vector<int32_t> cli_ids(const std::string& gguf, const std::string& text,
                                      const std::string& flags = "") {
    spit(path("text.txt"), text);
    Proc p = strata("tokenize -m " + gguf + " -f " + path("text.txt") + " --ids " + flags);
    EXPECT_EQ(p.code, 0) << p.err;
    EXPECT_EQ(std::count(p.out.begin(), p.out.end(), '\n'), 1) << p.out;
    return parse_id_list(p.out);
  }
  static void expect_one_line_error(const Proc& p, const std::string& needle) {
    strata::testing::expect_one_line_error(p, needle, true);
  }

  static inline fs::path dir_;
  static inline std::vector<Case> cases_;
};

TEST_F(TokenizeCli, LibraryMatchesSentencePieceCases) {
  ASSERT_EQ(cases_.size(), 20u);
  auto f = strata::GgufFile::open(model());
  ASSERT_TRUE(f.ok()) << f.message();
  auto tok = strata::Tokenizer::from_gguf(**f);
  ASSERT_TRUE(tok.ok()) << tok.message();
  EXPECT_FALSE((*tok)->add_bos());
  for (const Case& c : cases_) {
    EXPECT_EQ((*tok)->encode(c.text, false, false), c.ids) << "text: '" << c.text << "'";
    // add_special follows the vocab (no BOS/EOS here), parse_special changes nothing without specials.
    EXPECT_EQ((*tok)->encode(c.text, true, true), c.ids) << "text: '" << c.text << "'";
  }
}

TEST_F(TokenizeCli, CliMatchesSentencePieceCases) {
  for (const Case& c : cases_) EXPECT_EQ(cli_ids(model(), c.text), c.ids) << "text: '" << c.text << "'";
}

TEST_F(TokenizeCli, PiecesFormatLikeLlamaTokenize) {
  Proc p = strata("tokenize -m " + model() + " -p 'Hello world'");
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_EQ(p.out, "   460 -> ' He'\n   284 -> 'll'\n  4023 -> 'o'\n   823 -> ' world'\n");
  EXPECT_TRUE(p.err.empty()) << p.err;
  Proc q = strata("tokenize -m " + model() + " -p 'Hello world' --pieces --show-count");
  ASSERT_EQ(q.code, 0) << q.err;
  EXPECT_EQ(q.out, p.out + "Total number of tokens: 4\n");
  Proc r = strata("tokenize -m " + model() + " -p 'Hello world' --ids");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "[460, 284, 4023, 823]\n");
  Proc e = strata("tokenize -m " + model() + " -p '' --ids --show-count");
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_EQ(e.out, "[]\nTotal number of tokens: 0\n");
}

TEST_F(TokenizeCli, PromptEscapes) {
  // -p processes \n, \t, ... (as llama-tokenize does); --no-escape keeps the backslash.
  const std::vector<int32_t> nl = {2609, 4023, 13, 1765, 322};  // "hello\nworld" from the json
  Proc p = strata("tokenize -m " + model() + " -p 'hello\\nworld' --ids");
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_EQ(parse_id_list(p.out), nl);
  Proc q = strata("tokenize -m " + model() + " -p 'hello\\nworld' --ids --no-escape");
  ASSERT_EQ(q.code, 0) << q.err;
  EXPECT_NE(parse_id_list(q.out), nl);
  Proc x = strata("tokenize -m " + model() + " -p 'hello\\x0aworld' --ids");
  ASSERT_EQ(x.code, 0) << x.err;
  EXPECT_EQ(parse_id_list(x.out), nl);
  // A file is tokenized byte for byte: the two characters '\' 'n' stay.
  EXPECT_EQ(cli_ids(model(), "hello\\nworld"), parse_id_list(q.out));
}

TEST_F(TokenizeCli, SpecialTokens) {
  auto f = strata::GgufFile::open(model());
  ASSERT_TRUE(f.ok()) << f.message();
  auto tok = strata::Tokenizer::from_gguf(**f);
  ASSERT_TRUE(tok.ok()) << tok.message();
  const int32_t bos = (*tok)->bos_id();
  ASSERT_GE(bos, 0);
  const std::string bos_text = (*tok)->token_text(bos);  // "<s>"
  const std::vector<int32_t> parsed = cli_ids(model(), bos_text + "x", "--parse-special");
  ASSERT_FALSE(parsed.empty());
  EXPECT_EQ(parsed[0], bos);
  const std::vector<int32_t> plain = cli_ids(model(), bos_text + "x");
  EXPECT_EQ(std::count(plain.begin(), plain.end(), bos), 0);
  EXPECT_EQ(plain, (*tok)->encode(bos_text + "x", false, false));
  // Control tokens show their text in --pieces output (llama-tokenize prints them with special = true).
  spit(path("special.txt"), bos_text);
  Proc p = strata("tokenize -m " + model() + " -f " + path("special.txt") + " --parse-special");
  ASSERT_EQ(p.code, 0) << p.err;
  char want[64];
  std::snprintf(want, sizeof want, "%6d -> '%s'\n", bos, bos_text.c_str());
  EXPECT_EQ(p.out, want);
}

// llama.cpp's own tokenizer test cases through the CLI on vocab-only GGUFs (a sample of cases per
// vocab keeps the number of process launches small; the tokenizer's own tests run all of them).
TEST_F(TokenizeCli, LlamaCppVocabCases) {
  STRATA_REQUIRE_FIXTURES(fx);
  const char* vocabs[] = {"llama-spm", "gpt-2", "qwen2", "llama-bpe", "deepseek-llm"};
  for (const char* v : vocabs) {
    const std::string base = fx + "/vocab/ggml-vocab-" + v + ".gguf";
    if (!fs::exists(base)) {
      ADD_FAILURE() << "missing " << base;
      continue;
    }
    const std::string raw = slurp(base + ".inp");
    std::vector<std::string> inp;
    const std::string sep = "\n__ggml_vocab_test__\n";
    for (size_t pos = 0; pos < raw.size();) {
      const size_t next = raw.find(sep, pos);
      inp.push_back(raw.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
      pos = next == std::string::npos ? raw.size() : next + sep.size();
    }
    std::vector<std::vector<int32_t>> out;
    std::istringstream os(slurp(base + ".out"));
    for (std::string line; std::getline(os, line);) {
      std::istringstream ls(line);
      std::vector<int32_t> ids;
      for (int32_t id; ls >> id;) ids.push_back(id);
      out.push_back(ids);
    }
    ASSERT_EQ(inp.size(), out.size()) << v;
    // Big vocabs take ~0.5 s to load per launch (more under ASan): sample them more thinly.
    const size_t step = fs::file_size(base) > (2u << 20) ? 23 : 5;
    for (size_t i = 0; i < inp.size(); i += step)
      EXPECT_EQ(cli_ids(base, inp[i]), out[i]) << v << " case " << i << ": '" << inp[i] << "'";
  }
}

TEST_F(TokenizeCli, BadInputOneLineErrors) {
  const std::string m = " -m " + model();
  expect_one_line_error(strata("tokenize" + m), "-p TEXT or -f FILE");
  expect_one_line_error(strata("tokenize -p x"), "model");
  expect_one_line_error(strata("tokenize" + m + " -p a -f b"), "excludes");
  expect_one_line_error(strata("tokenize" + m + " -p a --ids --pieces"), "excludes");
  expect_one_line_error(strata("tokenize" + m + " -f " + path("missing.txt")), "missing.txt");
  expect_one_line_error(strata("tokenize" + m + " -f " + dir_.string()), "directory");
  expect_one_line_error(strata("tokenize -m " + path("nope.gguf") + " -p x"), "nope.gguf");
  expect_one_line_error(strata("tokenize -m " + data("bundled_smoke_valid.txt") + " -p x"), "magic");
  expect_one_line_error(strata("tokenize" + m + " -p x --bogus"), "bogus");
}

// A GGUF vocab written as tokenizer.json (--export-tokenizer-json) and read back (--tokenizer)
// gives the GGUF's ids; --lines takes one escaped text per line.
TEST_F(TokenizeCli, TokenizerJsonExportAndLines) {
  STRATA_REQUIRE_FIXTURES(fx);
  const std::string gguf = fx + "/vocab/ggml-vocab-gpt-2.gguf";
  const std::string tj = path("tokenizer.json");
  Proc e = strata("tokenize -m " + gguf + " --export-tokenizer-json " + tj);
  ASSERT_EQ(e.code, 0) << e.err;
  spit(path("lines.txt"), "Hello world\n\\tTabs and\\nnewlines\n\nna\xc3\xafve 123  \n");
  Proc a = strata("tokenize -m " + gguf + " --lines -f " + path("lines.txt"));
  Proc b = strata("tokenize --tokenizer " + tj + " --lines -f " + path("lines.txt"));
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  std::istringstream lines(b.out);
  std::vector<std::string> got;
  for (std::string l; std::getline(lines, l);) got.push_back(l);
  ASSERT_EQ(got.size(), 4u) << b.out;
  EXPECT_EQ(parse_id_list(got[0]), cli_ids(gguf, "Hello world"));
  EXPECT_EQ(parse_id_list(got[1]), cli_ids(gguf, "\tTabs and\nnewlines"));  // escapes processed
  EXPECT_EQ(got[2], "[]");
  EXPECT_EQ(parse_id_list(got[3]), cli_ids(gguf, "na\xc3\xafve 123  "));
}

TEST_F(TokenizeCli, TokenizerJsonBadInputOneLineErrors) {
  expect_one_line_error(strata("tokenize --tokenizer " + path("nope.json") + " -p x"), "nope.json");
  spit(path("wordpiece.json"), R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})");
  expect_one_line_error(strata("tokenize --tokenizer " + path("wordpiece.json") + " -p x"),
                        "wordpiece.json: model.type: 'WordPiece' is not supported");
  spit(path("broken.json"), R"({"model": )");
  expect_one_line_error(strata("tokenize --tokenizer " + path("broken.json") + " -p x"), "not valid JSON");
  expect_one_line_error(strata("tokenize -m " + model() + " --tokenizer " + path("broken.json") + " -p x"),
                        "excludes");
  // The bundled model's vocab is SentencePiece: not a byte-level BPE tokenizer.json.
  expect_one_line_error(strata("tokenize -m " + model() + " --export-tokenizer-json " + path("out.json")),
                        "'llama'");
  expect_one_line_error(strata("tokenize -m " + model() + " -p x --lines"), "-f");
}

}  // namespace
