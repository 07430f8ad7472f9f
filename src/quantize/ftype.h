// llama-quantize's file types ("Q4_0", "MXFP4_MOE", ...) that `strata quantize` writes: the name,
// llama.cpp's llama_ftype number (stored as general.file_type) and the tensor type a quantizable
// tensor gets before the per-tensor rules (type_policy.h) adjust it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "quant/qtypes.h"

namespace strata {

struct QuantFtype {
  const char* name;       // llama-quantize's spelling, e.g. "MXFP4_MOE"
  uint32_t llama_ftype;   // llama.cpp's LLAMA_FTYPE_* number
  GgmlType default_type;  // e.g. MXFP4 for MXFP4_MOE
  const char* help;
};

// By name (case-insensitive) or by llama_ftype number, as llama-quantize accepts; nullptr if
// strata does not write that type.
const QuantFtype* quant_ftype(std::string_view name);
const std::vector<QuantFtype>& quant_ftypes();
// "Q4_0, Q8_0, ..." for help texts and errors.
std::string quant_ftype_names();

}  // namespace strata
