#include "memory/experts/prefetch.h"

#include <cmath>
#include <string>

#include "format/tensor_names.h"
#include "kernels/ops.h"
#include "quant/quant_ref.h"

namespace strata {

Result<RouterLookahead> RouterLookahead::build(const GgufFile& f, int n_layer, int n_expert, int n_used) {
  std::vector<const TensorView*> w(static_cast<size_t>(n_layer), nullptr);
  std::vector<const float*> bias(static_cast<size_t>(n_layer), nullptr);
  for (int l = 0; l < n_layer; ++l) {
    w[static_cast<size_t>(l)] = f.find_tensor(blk_name(l, kRouterWeight));
    const TensorView* b = f.find_tensor(blk_name(l, kRouterBias));
    if (b && b->type == GgmlType::f32 && b->ne[0] == n_expert)
      bias[static_cast<size_t>(l)] = static_cast<const float*>(b->data);
  }
  return from_views(w, bias, n_expert, n_used);
}

Result<RouterLookahead> RouterLookahead::from_views(const std::vector<const TensorView*>& ws,
                                                    const std::vector<const float*>& bias, int n_expert,
                                                    int n_used, RouterScore score, float inv_temp,
                                                    const std::string& what) {
  RouterLookahead r;
  r.n_expert_ = n_expert;
  r.n_used_ = n_used;
  r.score_ = score;
  r.inv_temp_ = inv_temp;
  const size_t n_layer = ws.size();
  r.w_.resize(n_layer);
  r.b_.resize(n_layer);
  for (size_t l = 0; l < n_layer; ++l) {
    const TensorView* t = ws[l];
    if (!t) continue;
    const std::string name = t->name.empty() ? what + " of layer " + std::to_string(l) : "'" + t->name + "'";
    if (t->ne[1] != n_expert || t->ne[2] != 1 || t->ne[3] != 1)
      return err("router %s is %s, expected [n_embd, %d]", name.c_str(), t->shape_string().c_str(), n_expert);
    if (r.n_embd_ == 0) r.n_embd_ = static_cast<int>(t->ne[0]);
    if (t->ne[0] != r.n_embd_)
      return err("router %s: n_embd %lld differs between layers", name.c_str(),
                 static_cast<long long>(t->ne[0]));
    const QuantRef* q = quant_ref(t->type);
    if (!q || !q->to_float)
      return err("router %s: type %s cannot be dequantized", name.c_str(), type_name(t->type));
    std::vector<float>& w = r.w_[l];
    w.resize(static_cast<size_t>(n_expert) * static_cast<size_t>(r.n_embd_));
    for (int e = 0; e < n_expert; ++e)
      q->to_float(t->row(e), w.data() + static_cast<size_t>(e) * r.n_embd_, r.n_embd_);
    if (l < bias.size() && bias[l]) r.b_[l].assign(bias[l], bias[l] + n_expert);
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
      float z = dot_f32(w.data() + static_cast<size_t>(e) * n_embd_, xt, n_embd_);
      if (score_ == RouterScore::sqrt_softplus) {
        z *= inv_temp_;
        z = std::sqrt(z > 20.0f ? z : std::log1p(std::exp(z)));
      }
      logits_[static_cast<size_t>(e)] = z + (b.empty() ? 0.0f : b[static_cast<size_t>(e)]);
    }
    top_k(logits_.data(), n_expert_, n_used_, top_.data());
    for (int j = 0; j < m; ++j) mark[top_[static_cast<size_t>(j)]] = 1;  // top_ is in descending order
  }
}

}  // namespace strata
