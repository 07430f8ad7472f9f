#include "text/text_test_util.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

namespace strata::testing {

static std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const Tokenizer* vocab_tokenizer(const std::string& fixtures, const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.get();
  const std::string path = fixtures + "/vocab/ggml-vocab-" + name + ".gguf";
  auto file = GgufFile::open(path);
  if (!file.ok()) {
    ADD_FAILURE() << file.message();
    return nullptr;
  }
  auto tok = Tokenizer::from_gguf(**file);
  if (!tok.ok()) {
    ADD_FAILURE() << tok.message();
    return nullptr;
  }
  return (cache[name] = std::move(tok).value()).get();
}

std::vector<VocabCase> vocab_cases(const std::string& fixtures, const std::string& name) {
  const std::string base = fixtures + "/vocab/ggml-vocab-" + name + ".gguf";
  const std::string inp = slurp(base + ".inp");
  const std::string out = slurp(base + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<VocabCase> cases;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t at = inp.find(sep, pos);
    if (at == std::string::npos) break;
    cases.push_back({inp.substr(pos, at - pos), {}});
    pos = at + sep.size();
  }
  std::istringstream lines(out);
  std::string line;
  for (VocabCase& c : cases) {
    if (!std::getline(lines, line)) break;
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.ids.push_back(id);
  }
  return cases;
}

std::string ids_to_string(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

}  // namespace strata::testing

#include "text/utf8.h"

namespace strata::testing {

text::VocabData tiny_bpe_data(const std::vector<std::string>& merges, const std::vector<ExtraToken>& extra,
                              const std::string& pre) {
  text::VocabData d;
  d.model = "gpt2";
  d.pre = pre;
  for (int b = 0; b < 256; ++b) d.tokens.push_back(text::byte_to_utf8(static_cast<uint8_t>(b)));
  d.merges = merges;
  for (const std::string& m : merges) {
    std::string joined = m;
    joined.erase(joined.find(' ', 1), 1);
    d.tokens.push_back(joined);
  }
  d.token_types.assign(d.tokens.size(), static_cast<int32_t>(text::TokenType::normal));
  for (const ExtraToken& e : extra) {
    d.tokens.push_back(e.text);
    d.token_types.push_back(static_cast<int32_t>(e.type));
  }
  return d;
}

}  // namespace strata::testing

namespace strata::testing {

MemGguf mem_gguf(const std::function<void(GgufWriter&)>& fill, const std::string& name) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  fill(w);
  MemGguf m;
  Status s = w.write_to_memory(&m.bytes);
  EXPECT_TRUE(s.ok()) << s.message();
  auto f = GgufFile::from_memory(m.bytes.data(), m.bytes.size(), name);
  EXPECT_TRUE(f.ok()) << (f.ok() ? "" : f.message());
  if (f.ok()) m.file = std::move(f).value();
  return m;
}

}  // namespace strata::testing
