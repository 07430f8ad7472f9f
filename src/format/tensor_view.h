// Weights are views (design.md principle 2): {type, shape, strides, bytes} over memory that
// someone else owns (an mmapped file, a tier slot, an owned buffer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "quant/qtypes.h"

namespace strata {

constexpr int kMaxDims = 4;

struct TensorView {
  std::string name;
  GgmlType type = GgmlType::f32;
  int n_dims = 0;
  int64_t ne[kMaxDims] = {1, 1, 1, 1};  // ne[0] is contiguous (ggml order)
  size_t nb[kMaxDims] = {0, 0, 0, 0};   // byte strides; nb[0] = type_size, nb[1] = row bytes
  const void* data = nullptr;
  size_t nbytes = 0;

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  size_t row_size() const { return nb[1]; }
  const uint8_t* row(int64_t i1, int64_t i2 = 0, int64_t i3 = 0) const {
    return static_cast<const uint8_t*>(data) + i1 * nb[1] + i2 * nb[2] + i3 * nb[3];
  }
  // The 2-D matrix [ne1][ne0] at index i2 of a 3-D tensor (e.g. one expert of ffn_up_exps).
  TensorView slice2d(int64_t i2) const;
  // "f32 [64, 128, 8]"
  std::string shape_string() const;
};

// Fills nb[] from type and ne[] for a contiguous tensor; nbytes too.
void tensor_view_set_contiguous(TensorView* t);

}  // namespace strata
