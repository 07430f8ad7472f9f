// The tensor plan `strata synth` fills (model/synth.cpp): what each architecture's planner
// (synth.cpp for the llama-class models, synth_deepseek4.cpp) lists, and how a tensor's values are
// drawn. Internal to model/synth*.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/synth.h"
#include "quant/qtypes.h"

namespace strata::synth_detail {

enum class Init {
  normal,      // N(0, scale²)
  uniform,     // U(lo, hi)
  embedding,   // N(0, 1) + (skew ? 0.5·sqrt(d)·u : 0)
  router,      // N(0, scale²) + strength(rank(e))·u
  expert_ids,  // i32 rows of ne[0] distinct expert ids in [0, n_expert) (deepseek4 hash routing)
};

struct TensorPlan {
  std::string name;
  GgmlType type;
  std::vector<int64_t> ne;
  Init init;
  float scale = 1.0f, lo = 0.0f, hi = 0.0f;
  int layer = -1;
};

// The matrix types of a --type: one type for every matrix, "mxfp4" / "nvfp4" (routed experts
// MXFP4 / NVFP4, the rest Q8_0), or "q4_k_m" (llama.cpp's Q4_K_M layer rule, in its own words: output.weight,
// and attn_v / ffn_down of the layers that get more bits, in Q6_K; everything else Q4_K).
struct TypeMix {
  GgmlType dense = GgmlType::count;    // matrices other than routed experts
  GgmlType experts = GgmlType::count;  // routed experts
  bool k_m = false;
  bool ok() const { return dense != GgmlType::count; }
};

TypeMix parse_type(const std::string& t);
// The type of one matrix; role: "attn_v", "ffn_down", "output" or any other matrix.
GgmlType matrix_type(const TypeMix& m, bool expert, const std::string& role, int layer, int n_layer);
// Elements per block of the mix's matrices (rows must be whole blocks).
int64_t mix_block(const TypeMix& m);

// Appends tensors to a plan with the usual initialisations.
struct PlanBuilder {
  std::vector<TensorPlan>* plan;
  void mat(std::string name, GgmlType t, std::vector<int64_t> ne, int layer);   // N(0, 1/ne[0])
  void norm(std::string name, int64_t n, int layer);                            // f32 U(0.5, 1.5)
  void vec(std::string name, std::vector<int64_t> ne, float scale, int layer);  // f32 N(0, scale²)
  void uniform(std::string name, std::vector<int64_t> ne, float lo, float hi, int layer);  // f32 U(lo, hi)
};

}  // namespace strata::synth_detail

namespace strata {
class GgufWriter;
struct SynthVocab;

// deepseek4 (synth_deepseek4.cpp): the spec's problems, its tensors, its metadata.
Status synth_validate_deepseek4(const SynthSpec& s);
void synth_plan_deepseek4(const SynthSpec& s, std::vector<synth_detail::TensorPlan>* plan);
void synth_meta_deepseek4(const SynthSpec& s, GgufWriter& w);

// deepseek_v41 (synth_deepseek_v41.cpp): the spec's problems, and the checkpoint directory.
Status synth_validate_deepseek_v41(const SynthSpec& s);
Result<SynthInfo> synth_write_deepseek_v41(const SynthSpec& s, const std::string& dir);
}  // namespace strata
