#include "format/tensor_view.h"

#include "base/assert.h"

namespace strata {

void tensor_view_set_contiguous(TensorView* t) {
  const TypeInfo& ti = type_info(t->type);
  STRATA_ASSERT(ti.known);
  t->nb[0] = ti.type_size;
  t->nb[1] = ti.type_size * static_cast<size_t>(t->ne[0] / ti.block_size);
  for (int i = 2; i < kMaxDims; ++i) t->nb[i] = t->nb[i - 1] * static_cast<size_t>(t->ne[i - 1]);
  t->nbytes = t->nb[3] * static_cast<size_t>(t->ne[3]);
}

TensorView TensorView::slice2d(int64_t i2) const {
  STRATA_ASSERT(i2 >= 0 && i2 < ne[2]);
  TensorView v = *this;
  v.n_dims = 2;
  v.ne[2] = v.ne[3] = 1;
  v.data = static_cast<const uint8_t*>(data) + i2 * nb[2];
  v.nb[3] = v.nb[2] = nb[1] * static_cast<size_t>(ne[1]);
  v.nbytes = v.nb[2];
  return v;
}

std::string TensorView::shape_string() const {
  std::string s = std::string(type_name(type)) + " [";
  for (int i = 0; i < (n_dims > 0 ? n_dims : 1); ++i) {
    if (i) s += ", ";
    s += std::to_string(ne[i]);
  }
  return s + "]";
}

}  // namespace strata
