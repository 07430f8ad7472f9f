#include "memory/experts/prefetch.h"

#include <string>

#include "format/tensor_names.h"
#include "kernels/ops.h"
#include "quant/quant_ref.h"

namespace strata {

Result<RouterLookahead> RouterLookahead::build(const GgufFile& f, int n_layer, int n_expert, int n_used) {
  RouterLookahead r;
  r.n_expert_ = n_expert;
  r.n_used_ = n_used;
  r.w_.resize(static_cast<size_t>(n_layer));
  r.b_.resize(static_cast<size_t>(n_layer));
  for (int l = 0; l < n_layer; ++l) {
    const std::string name = blk_name(l, kRouterWeight);
    const TensorView* t = f.find_tensor(name);
    if (!t) continue;
    if (t->ne[1] != n_expert || t->ne[2] != 1 || t->ne[3] != 1)
      return err("router '%s' is %s, expected [n_embd, %d]", name.c_str(), t->shape_string().c_str(),
                 n_expert);
    if (r.n_embd_ == 0) r.n_embd_ = static_cast<int>(t->ne[0]);
    if (t->ne[0] != r.n_embd_)
      return err("router '%s': n_embd %lld differs between layers", name.c_str(),
                 static_cast<long long>(t->ne[0]));
    const QuantRef* q = quant_ref(t->type);
    if (!q || !q->to_float)
      return err("router '%s': type %s cannot be dequantized", name.c_str(), type_name(t->type));
    std::vector<float>& w = r.w_[static_cast<size_t>(l)];
    w.resize(static_cast<size_t>(n_expert) * static_cast<size_t>(r.n_embd_));
    for (int e = 0; e < n_expert; ++e)
      q->to_float(t->row(e), w.data() + static_cast<size_t>(e) * r.n_embd_, r.n_embd_);
    const TensorView* b = f.find_tensor(blk_name(l, kRouterBias));
    if (b && b->type == GgmlType::f32 && b->ne[0] == n_expert) {
      const float* bp = static_cast<const float*>(b->data);
      r.b_[static_cast<size_t>(l)].assign(bp, bp + n_expert);
    }
  }
  r.logits_.resize(static_cast<size_t>(n_expert));
  r.top_.resize(static_cast<size_t>(n_used));
  return r;
}

void RouterLookahead::predict(int layer, const float* x, int64_t n, uint8_t* mark, int top) {
  const int m = top > 0 && top < n_used_ ? top : n_used_;
  if (!has(layer)) return;
  const std::vector<float>& w = w_[static_cast<size_t>(layer)];
  const std::vector<float>& b = b_[static_cast<size_t>(layer)];
  for (int64_t t = 0; t < n; ++t) {
    const float* xt = x + t * n_embd_;
    for (int e = 0; e < n_expert_; ++e) {
      logits_[static_cast<size_t>(e)] = dot_f32(w.data() + static_cast<size_t>(e) * n_embd_, xt, n_embd_) +
                                        (b.empty() ? 0.0f : b[static_cast<size_t>(e)]);
    }
    top_k(logits_.data(), n_expert_, n_used_, top_.data());
    for (int j = 0; j < m; ++j) mark[top_[static_cast<size_t>(j)]] = 1;  // top_ is in descending order
  }
}

}  // namespace strata
