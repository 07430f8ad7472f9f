// Fill-in-the-middle prompts: the tokens a code model with FIM tokens (FimTokens, text/tokenizer.h)
// completes between a prefix and a suffix — `suffix` on /v1/completions and llama-server's
// /infill. The layout is the prefix-suffix-middle order with Qwen2.5-Coder's repository-level
// context, as llama-server v0.5.0 builds it (it puts a bos after the extra context; here it leads):
//
//   [bos] [rep "myproject\n"] {[sep FILENAME "\n"] | "\n\n--- snippet ---\n\n"} EXTRA ...
//   [sep "filename\n"] pre PREFIX PROMPT suf SUFFIX mid
//
// (rep / sep only where the vocabulary has them; bos where it adds one). Text is tokenized
// without parsing special tokens, so a control token's text inside code stays text. Over
// max_tokens, the extra chunks go first (oldest first), then the prefix loses tokens from its
// start and the suffix from its end, three prefix tokens kept for every suffix token (llama-server's
// 3:1), never the prompt or the FIM tokens; fewer than that is an error naming the numbers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "text/tokenizer.h"

namespace strata {

struct FimChunk {
  std::string filename = "tmp";
  std::string text;
};

struct FimInput {
  std::vector<int32_t> prefix;  // tokens before the hole (the request's prompt or input_prefix)
  std::string suffix;           // text after the hole
  std::string middle;           // /infill's "prompt": the start of the middle, after the prefix
  std::vector<FimChunk> extra;  // other files' context (/infill's input_extra)
};

// Errors: the vocabulary has no pre / suf / mid tokens; the required tokens exceed max_tokens.
Result<std::vector<int32_t>> fim_prompt(const Tokenizer& tok, const FimInput& in, int64_t max_tokens);

}  // namespace strata
