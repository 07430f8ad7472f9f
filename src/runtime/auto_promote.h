// `strata quantize --auto-promote`: the smallest mix that passes a quality gate, found by measuring.
//
// Units: each class policy class of each layer (experts, attn, shexp, ffn of blk.L) whose tensors
// the file type makes narrower than the promotion type (none wider), plus the token embeddings and
// the output matrix when they are narrower; without by_class a layer's classes form one unit. The
// router is never a unit (it stays as the file type leaves it: F32 unless --policy names it).
//
//   1. the requested mix as is: passes the gate -> written, nothing promoted;
//   2. every unit promoted: fails -> error naming the number (nothing can pass);
//   3. sensitivity of unit u = the gate excess of the model where only u keeps the requested types
//      and every other unit is promoted;
//   4. greedy: promote units in order of sensitivity (most sensitive first), measuring after each,
//      until the gate passes; that file becomes OUT.
// The gate excess is max(mean KLD / kld gate, (1 - lowest routing consistency) / (1 - routing
// gate)) over the gates that are on: above 1 fails. Each measurement is strata kld
// (runtime/kl_divergence.h) of a candidate written to one scratch file beside OUT (OUT.promote,
// removed at the end) against IN, loaded once, on the same tokens; a mix is measured once. The
// result is given back as --policy rules (the user's, then `layers[...].CLASS=TYPE` ones) that
// reproduce the file.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"
#include "quantize/quantize_gguf.h"
#include "runtime/kl_divergence.h"

namespace strata {

struct AutoPromoteOptions {
  GgmlType promote_type = GgmlType::q8_0;
  double gate_kld = -1, gate_routing = -1;  // negative: that gate is off (not both)
  KldOptions kld;
  int n_threads = 0;     // model loads (quantizing uses QuantizeOptions::n_threads)
  bool by_class = true;  // a layer's classes are separate units ("layer 3 experts", "layer 3 attn")
};

struct PromoteUnit {
  std::string name;                  // "layer 3", "embd", "output"
  int layer = -1;                    // -1: embd / output
  std::vector<std::string> classes;  // class policy classes promoted with it
  double sensitivity = 0;            // gate excess with only this unit at the requested types
};

struct AutoPromoteResult {
  std::vector<PromoteUnit> promoted;  // in promotion order
  std::string policy;                 // --policy string reproducing OUT
  uint64_t out_bytes = 0, n_elements = 0;
  KldResult measured;  // OUT against IN
};

// Lines for the user (one measurement or decision each, no newline).
using PromoteLog = std::function<void(const std::string& line)>;

// `in` opened from in_path; `base` the requested quantization (its class rules are kept, the
// promotions go after them). Writes OUT only when the gate passes. Errors: no gate, a promotion
// type strata cannot write, nothing to promote when the requested mix fails, a gate that fails
// even with every unit promoted (naming the number), and load / measure / write errors.
Result<AutoPromoteResult> auto_promote(const GgufFile& in, const std::string& in_path,
                                       const QuantizeOptions& base, std::string_view text,
                                       const AutoPromoteOptions& opts, const std::string& out_path,
                                       const PromoteLog& log);

// The gate excess of a measurement (see the file comment).
double gate_excess(const KldResult& r, double gate_kld, double gate_routing);

}  // namespace strata
