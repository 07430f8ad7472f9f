// An observer of the activations entering weight matrices (`strata imatrix`: Σ x² per input
// column). Off (null) in normal runs, where it costs one pointer load per matmul call.
//   linear / LinearPlan: on_linear(w, x, n) when rows of x are converted for w (LinearPlan::convert);
//   expert FFN (kernels/expert_ffn.h): on_expert(mat, x, c0, nc, count_row) for one expert matrix
//   (identified by its first row's address, ExpertMat::data), x entering columns [c0, c0+nc);
//   `count_row` is true for exactly one call per activation row of that matrix.
// Both may be called from pool threads at once: an implementation synchronises itself.
#pragma once

#include <cstdint>

#include "format/tensor_view.h"

namespace strata {

class ActivationTap {
 public:
  virtual ~ActivationTap() = default;
  virtual void on_linear(const TensorView& w, const float* x, int64_t n) = 0;
  virtual void on_expert(const void* mat, const float* x, int64_t c0, int64_t nc, bool count_row) = 0;
};

// Process-wide; set it before the model runs and clear it (nullptr) after.
void set_activation_tap(ActivationTap* tap);
ActivationTap* activation_tap();

}  // namespace strata
