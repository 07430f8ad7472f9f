// `strata quantize --policy`: strata's rules by tensor class and layer, applied on top of the file
// type's rules (type_policy.h):
//
//   router=f32,attn=q8_0,experts=mxfp4,layers[0,-1].experts=q8_0
//
// Each rule is [layers[L,...].]CLASS=TYPE; later rules win; layer indices count from the end when
// negative, `a..b` is a range. Classes: router (ffn_gate_inp), attn (attention matrices), experts
// (routed expert banks, *_exps), shexp (shared experts, *_shexp), ffn (dense FFN matrices), embd
// (token_embd), output (output.weight). Presets: fp4-experts (MXFP4 experts, Q8_0 attention /
// shared experts / dense FFN / embeddings / output, F32 router) and fp4-all (every matrix MXFP4,
// F32 router). A rule that names a router makes it convertible (llama-quantize never converts it).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "quant/qtypes.h"

namespace strata {

struct ClassRule {
  std::vector<int> layers;  // as written (negative: from the end); empty: every tensor of the class
  std::string cls;
  GgmlType type;
};

// Errors name an unknown class, preset or type, a malformed layer list, an empty rule.
Result<std::vector<ClassRule>> parse_class_policy(const std::string& spec);

// Layers outside [-n_layer, n_layer) -> error (before anything is written).
Status check_class_policy(const std::vector<ClassRule>& rules, int n_layer);

// The class of a tensor ("" when none: norms, biases, 1-D tensors).
std::string tensor_class(const std::string& name);

// The type the last matching rule gives, or false.
bool class_policy_type(const std::vector<ClassRule>& rules, const std::string& name, int n_layer,
                       GgmlType* out);

}  // namespace strata
