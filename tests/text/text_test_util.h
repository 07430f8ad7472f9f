// Helpers shared by the text/ tests: the llama.cpp vocab fixtures, loaded once per test binary.
#pragma once

#include <string>
#include <vector>

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
