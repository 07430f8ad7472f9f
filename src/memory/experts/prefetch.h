// Router look-ahead: predict which experts layers l+1 .. l+D will select, while layer l runs.
//
// The residual stream changes little from one layer to the next, so the next layers' routers
// applied to the current MoE input already pick most of the experts they will pick for real
// (measured: prefetch precision / recall in the store's statistics). Routers are small
// ([n_expert][n_embd]); they are dequantized to f32 once at load. Every router variant of the GGUF
// decoders (softmax → top-k, top-k → softmax, with or without a router bias) selects the top-k of
// the raw logits (+ bias), so top-k of the logits is the prediction; DeepSeek-V4.1's router
// (RouterScore::sqrt_softplus) adds its bias to sqrt(softplus(logit / temperature)), which the
// prediction then ranks too.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"

namespace strata {

enum class RouterScore { logits, sqrt_softplus };

class RouterLookahead {
 public:
  // Reads blk.<l>.ffn_gate_inp.weight ({n_embd, n_expert}, any type with a to_float) and the
  // optional .bias of every layer that has one. Layers without a router predict nothing.
  static Result<RouterLookahead> build(const GgufFile& f, int n_layer, int n_expert, int n_used);
  // From the routers' views ([n_layer], each {n_embd, n_expert} of a type with a to_float, or null:
  // that layer predicts nothing) and optional biases ([n_layer] of [n_expert] or null); `score`
  // (with 1 / temperature) ranks the experts as the model's router does. `what` names them in errors.
  static Result<RouterLookahead> from_views(const std::vector<const TensorView*>& w,
                                            const std::vector<const float*>& bias, int n_expert, int n_used,
                                            RouterScore score = RouterScore::logits, float inv_temp = 1.0f,
                                            const std::string& what = "router");

  bool has(int layer) const {
    return layer >= 0 && layer < static_cast<int>(w_.size()) && !w_[static_cast<size_t>(layer)].empty();
  }
  int n_embd() const { return n_embd_; }

  // Marks in `mark` ([n_expert], set to 1) the union over the n rows of x ([n][n_embd] f32) of the
  // top-k experts of `layer`'s router, or of its `top` best when 0 < top < k (the surest guesses).
  // Not thread-safe (uses internal scratch).
  void predict(int layer, const float* x, int64_t n, uint8_t* mark, int top = 0);

 private:
  int n_embd_ = 0, n_expert_ = 0, n_used_ = 0;
  RouterScore score_ = RouterScore::logits;
  float inv_temp_ = 1.0f;
  std::vector<std::vector<float>> w_;  // per layer: [n_expert][n_embd], empty when absent
  std::vector<std::vector<float>> b_;  // per layer: [n_expert] or empty
  std::vector<float> logits_;
  std::vector<int32_t> top_;
};

}  // namespace strata
