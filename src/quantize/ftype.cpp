#include "quantize/ftype.h"

#include <cctype>
#include <charconv>

namespace strata {

const std::vector<QuantFtype>& quant_ftypes() {
  static const std::vector<QuantFtype> kTypes = {
      {"Q4_0", 2, GgmlType::q4_0, "4.5 bpw; output (or tied embeddings) Q6_K"},
      {"Q5_0", 8, GgmlType::q5_0, "5.5 bpw; output (or tied embeddings) Q6_K"},
      {"Q4_K_S", 14, GgmlType::q4_k,
       "4.5 bpw K-quant; first attn_v and ffn_down Q5_K; rows not /256 -> Q5_0"},
      {"Q4_K_M", 15, GgmlType::q4_k, "4.5 bpw K-quant; some attn_v / ffn_down Q6_K; rows not /256 -> Q5_0"},
      {"Q5_K_S", 16, GgmlType::q5_k, "5.5 bpw K-quant; rows not /256 -> Q5_1"},
      {"Q5_K_M", 17, GgmlType::q5_k, "5.5 bpw K-quant; some attn_v / ffn_down Q6_K; rows not /256 -> Q5_1"},
      {"MXFP4_MOE", 38, GgmlType::mxfp4, "expert banks MXFP4, other matrices Q8_0"},
      {"NVFP4", 39, GgmlType::nvfp4, "expert banks NVFP4, other matrices Q8_0 (MXFP4_MOE's mix)"},
      {"Q6_K", 18, GgmlType::q6_k, "6.56 bpw; rows not a multiple of 256 fall back to Q8_0"},
      {"Q8_0", 7, GgmlType::q8_0, "8.5 bpw"},
      {"F16", 1, GgmlType::f16, "16 bpw"},
      {"BF16", 32, GgmlType::bf16, "16 bpw"},
      {"F32", 0, GgmlType::f32, "32 bpw"},
  };
  return kTypes;
}

const QuantFtype* quant_ftype(std::string_view name) {
  auto iequal = [](std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (std::toupper(static_cast<unsigned char>(a[i])) != std::toupper(static_cast<unsigned char>(b[i])))
        return false;
    }
    return true;
  };
  for (const QuantFtype& t : quant_ftypes()) {
    if (iequal(t.name, name)) return &t;
  }
  uint32_t id = 0;
  const char* end = name.data() + name.size();
  auto [p, ec] = std::from_chars(name.data(), end, id);
  if (ec == std::errc() && p == end && !name.empty()) {
    for (const QuantFtype& t : quant_ftypes()) {
      if (t.llama_ftype == id) return &t;
    }
  }
  return nullptr;
}

std::string quant_ftype_names() {
  std::string s;
  for (const QuantFtype& t : quant_ftypes()) {
    if (!s.empty()) s += ", ";
    s += t.name;
  }
  return s;
}

}  // namespace strata
