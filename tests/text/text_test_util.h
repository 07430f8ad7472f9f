// Helpers shared by the text/ tests: the llama.cpp vocab fixtures, loaded once per test binary.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "format/gguf.h"

#include "text/tokenizer.h"

namespace strata::testing {

// Tokenizer of fixtures/vocab/ggml-vocab-<name>.gguf, loaded on first use and cached for the
// rest of the binary (the files are 2-10 MB). nullptr (with an ADD_FAILURE) when it fails.
const Tokenizer* vocab_tokenizer(const std::string& fixtures, const std::string& name);

struct VocabCase {
  std::string text;
  std::vector<int32_t> ids;
};
// The .inp / .out pair of a vocab: strings split on "\n__ggml_vocab_test__\n", one id line each.
std::vector<VocabCase> vocab_cases(const std::string& fixtures, const std::string& name);

std::string ids_to_string(const std::vector<int32_t>& ids);

}  // namespace strata::testing

namespace strata::testing {

// A tiny byte-level BPE vocab: ids 0..255 are the 256 byte-alphabet characters (in byte order),
// then one token per merge result, then `extra` tokens with their types.
struct ExtraToken {
  std::string text;
  text::TokenType type;
};
text::VocabData tiny_bpe_data(const std::vector<std::string>& merges,
                              const std::vector<ExtraToken>& extra = {}, const std::string& pre = "gpt-2");

// An in-memory GGUF of architecture "llama" with whatever `fill` writes (metadata tests).
struct MemGguf {
  std::vector<uint8_t> bytes;
  std::unique_ptr<GgufFile> file;  // null (with a test failure) when it does not parse
};
MemGguf mem_gguf(const std::function<void(GgufWriter&)>& fill, const std::string& name = "test.gguf");

}  // namespace strata::testing
