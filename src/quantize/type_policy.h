// Which type each tensor of a model gets when `strata quantize` converts it to a file type: the
// rules of llama-quantize (llama.cpp v0.5.0, without an importance matrix), re-implemented:
//
//   1. Only tensors with >= 2 non-trivial dims whose name ends in "weight" are converted; norms,
//      MoE routers (ffn_gate_inp), position / token-type embeddings and a list of small special
//      tensors (conv1d, RWKV time-mix, multimodal patch / position tensors...) keep their type.
//   2. --token-embedding-type / --output-tensor-type set token_embd / output outright.
//   3. For a quantized file type: the first --tensor-type regex that matches the name sets the
//      type; else, unless --pure, the mix rules: output (and token_embd when the model has no
//      output.weight, i.e. tied embeddings) -> Q8_0 for MXFP4_MOE or a row length the type's
//      block does not divide, else Q6_K (when the type is not Q8_0); MXFP4_MOE: 3-D (expert)
//      tensors MXFP4, other matrices Q8_0 (NVFP4, a file type llama.cpp numbers but its
//      llama-quantize has no rules for: the same with NVFP4); models of exactly 8 experts keep
//      attn_k / attn_v-like tensors in Q8_0. Q4_K_M / Q5_K_M: attn_v-like tensors (counted in file
//      order) and ffn_down of the layers use_more_bits picks (the first and last eighth, and every
//      third between) Q6_K; Q4_K_S: the first four attn_v-like tensors and the first eighth's
//      ffn_down Q5_K; with an importance matrix, Q4_0's / Q5_0's first eighth of ffn_down Q4_1 /
//      Q5_1 (which strata cannot write: an error).
//   4. A row length the chosen block size does not divide falls back: Q6_K -> Q8_0, Q4_K ->
//      Q5_0, Q5_K -> Q5_1, then any type whose block still does not divide it -> F16.
// F16 / BF16 / F32 file types convert every tensor of rule 1 to that type (no regexes, no mix).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "quant/qtypes.h"
#include "quantize/class_policy.h"
#include "quantize/ftype.h"

namespace strata {

class NameRegex;  // type_policy.cpp: the compiled pattern (std::regex, ECMAScript as llama-quantize)

struct TensorTypeRule {
  std::string pattern;  // as given (lower-cased, as llama-quantize does)
  std::shared_ptr<const NameRegex> regex;
  GgmlType type;
  bool matches(const std::string& name) const;  // the pattern found anywhere in the name
};

// "REGEX=TYPE" -> a rule; errors name a missing '=', an empty side, a bad regex or an unknown type.
Result<TensorTypeRule> parse_tensor_type_rule(const std::string& spec);

struct TypePolicy {
  const QuantFtype* ftype = nullptr;
  bool pure = false;  // no mix rules (3), only regexes and fallback
  std::vector<TensorTypeRule> tensor_types;
  std::optional<GgmlType> output_type;      // --output-tensor-type
  std::optional<GgmlType> token_embd_type;  // --token-embedding-type
  bool has_imatrix = false;                 // --imatrix given (changes a mix rule)
  // --policy (class_policy.h): beats the mix rules (3), not a matching --tensor-type; applies to
  // F16 / BF16 / F32 file types too, and makes a router it names convertible.
  std::vector<ClassRule> class_rules;
};

// What the rules need to know about the model (from its GGUF metadata).
struct PolicyModel {
  std::string arch;         // general.architecture
  int n_layer = 0;          // <arch>.block_count
  int n_expert = 0;         // <arch>.expert_count (0: dense)
  bool has_output = false;  // an output.weight exists (else the embeddings are tied)
  int n_attention_wv = 0;   // attn_v-like tensors (attn_v, attn_qkv, attn_kv_b) in the file
};

// The counters llama-quantize keeps while it walks the tensors in file order (by layer, then
// name): one TypeCounters per pass, given to choose_tensor_type for every tensor in that order.
struct TypeCounters {
  int i_attention_wv = 0;
  int i_ffn_down = 0;
};

// attn_v-like (counted into PolicyModel::n_attention_wv).
bool is_attn_v_like(const std::string& name);

struct TypeChoice {
  GgmlType type;
  bool convertible = false;  // rule 1 passed (else the source type is kept)
  bool fell_back = false;    // rule 4 changed the type
};

// ne: the tensor's dims in ggml order (4, trailing ones); src: its type. Errors: a tensor of an
// MoE model whose FFN name has no valid "blk.N." layer (llama-quantize refuses it too).
Result<TypeChoice> choose_tensor_type(const TypePolicy& p, const PolicyModel& m, const std::string& name,
                                      GgmlType src, const int64_t ne[4], TypeCounters* counters);

}  // namespace strata
