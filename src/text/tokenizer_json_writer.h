// Writes a byte-level BPE vocab (tokenizer.ggml.model "gpt2", e.g. read from a GGUF) as a Hugging
// Face tokenizer.json that encodes the same way: model BPE (every token in model.vocab, the merges
// in rank order), control / unknown tokens as special added tokens and user-defined ones as
// non-special, the pre-tokenizer's regexes as Split "Isolated" steps before ByteLevel, BOS in a
// TemplateProcessing post-processor when the vocab adds it, a ByteLevel decoder.
// Token ids agree with the GGUF path except where llama.cpp's own regex quirk (non-ASCII
// White_Space seen as U+000B) changes a split.
#pragma once

#include <string>

#include "base/status.h"
#include "text/vocab.h"

namespace strata::text {

Result<std::string> to_tokenizer_json(const VocabData& data);

}  // namespace strata::text
