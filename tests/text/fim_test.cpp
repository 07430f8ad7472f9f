// text/fim: the fill-in-the-middle layout (prefix-suffix-middle with repository context), its
// truncation under a token budget, FIM tokens found by text and by metadata id, and the error of a
// vocabulary without them.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "text/fim.h"
#include "text/text_test_util.h"

namespace strata {
namespace {

using testing::ExtraToken;
using text::TokenType;

// Bytes, merges "a b" / "c d", then the given control tokens.
std::unique_ptr<Tokenizer> tok_with(const std::vector<std::string>& controls) {
  std::vector<ExtraToken> extra;
  for (const auto& c : controls) extra.push_back({c, TokenType::control});
  auto t = Tokenizer::from_data(testing::tiny_bpe_data({"a b", "c d"}, extra));
  EXPECT_TRUE(t.ok()) << t.message();
  return t.ok() ? std::move(*t) : nullptr;
}

std::vector<int32_t> ids(const Tokenizer& t, const std::string& s) {
  return t.encode(s, false, false);
}

std::vector<int32_t> cat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(Fim, PrefixSuffixMiddleLayout) {
  auto t = tok_with({"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"});
  ASSERT_TRUE(t);
  const FimTokens f = t->fim_tokens();
  ASSERT_TRUE(f.usable());
  EXPECT_EQ(f.rep, -1);
  FimInput in;
  in.prefix = ids(*t, "ab(");
  in.suffix = ") cd";
  in.middle = "x";
  auto p = fim_prompt(*t, in, 100);
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_EQ(*p, cat({{f.pre}, in.prefix, ids(*t, "x"), {f.suf}, ids(*t, ") cd"), {f.mid}}));
  // A control token's text inside the code stays text.
  in.suffix = "<|fim_middle|>";
  p = fim_prompt(*t, in, 100);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(std::count(p->begin(), p->end(), f.mid), 1);
  // Without the other files, no repository context even where the tokens exist.
  auto r = tok_with({"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|repo_name|>", "<|file_sep|>"});
  ASSERT_TRUE(r);
  in.suffix = "s";
  p = fim_prompt(*r, in, 100);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->front(), r->fim_tokens().pre);
}

TEST(Fim, RepositoryContextAndTruncation) {
  auto t = tok_with({"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|repo_name|>", "<|file_sep|>"});
  ASSERT_TRUE(t);
  const FimTokens f = t->fim_tokens();
  ASSERT_GE(f.rep, 0);
  ASSERT_GE(f.sep, 0);
  const std::vector<int32_t> bos =
      t->add_bos() && t->bos_id() >= 0 ? std::vector<int32_t>{t->bos_id()} : std::vector<int32_t>{};
  FimInput in;
  in.prefix = ids(*t, "0123456789");
  in.suffix = "abcdefgh";
  in.extra = {{"a.py", "one"}, {"b.py", "two"}};
  const std::vector<int32_t> suf = ids(*t, in.suffix);
  const std::vector<int32_t> body = cat({{f.pre}, in.prefix, {f.suf}, suf, {f.mid}});
  const std::vector<int32_t> repo = cat({{f.rep}, ids(*t, "myproject\n")});
  const std::vector<int32_t> a = cat({{f.sep}, ids(*t, "a.py\n"), ids(*t, "one")});
  const std::vector<int32_t> b = cat({{f.sep}, ids(*t, "b.py\n"), ids(*t, "two")});
  const std::vector<int32_t> file = cat({{f.sep}, ids(*t, "filename\n")});
  auto p = fim_prompt(*t, in, 1000);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, cat({bos, repo, a, b, file, body}));
  // Over budget the oldest file goes first, then all of them.
  p = fim_prompt(*t, in, static_cast<int64_t>(p->size() - a.size()));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, cat({bos, repo, b, file, body}));
  p = fim_prompt(*t, in, static_cast<int64_t>(bos.size() + body.size()));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, cat({bos, body}));
  // Then prefix and suffix shrink 3 : 1 (prefix from its start, suffix from its end): 8 left.
  p = fim_prompt(*t, in, static_cast<int64_t>(bos.size()) + 3 + 8);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, cat({bos, {f.pre}, ids(*t, "456789"), {f.suf}, {suf[0], suf[1]}, {f.mid}}));
  // The FIM tokens and the middle cannot shrink.
  in.middle = "xyz";
  auto bad = fim_prompt(*t, in, 5);
  ASSERT_FALSE(bad.ok());
  const std::string want = "take " + std::to_string(bos.size() + 6) + " tokens, more than the 5";
  EXPECT_NE(bad.message().find(want), std::string::npos) << bad.message();
}

TEST(Fim, NeedsTheTokens) {
  auto t = tok_with({"<|im_end|>"});
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->fim_tokens().usable());
  auto p = fim_prompt(*t, FimInput{}, 100);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.message().find("no fill-in-the-middle tokens"), std::string::npos) << p.message();
  // Metadata ids win over texts: CodeLlama-style names given by id.
  text::VocabData d = testing::tiny_bpe_data(
      {"a b"}, {{"<P>", TokenType::control}, {"<S>", TokenType::control}, {"<M>", TokenType::control}});
  d.fim_pre_id = 257, d.fim_suf_id = 258, d.fim_mid_id = 259;
  auto m = Tokenizer::from_data(std::move(d));
  ASSERT_TRUE(m.ok()) << m.message();
  const FimTokens f = (*m)->fim_tokens();
  EXPECT_EQ(f.pre, 257);
  EXPECT_EQ(f.suf, 258);
  EXPECT_EQ(f.mid, 259);
}

}  // namespace
}  // namespace strata
