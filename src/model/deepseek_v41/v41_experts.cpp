#include "model/deepseek_v41/v41_experts.h"

#include <string>

#include "model/deepseek_v41/v41_ckpt_quant.h"

namespace strata::v41 {

namespace {

const char* const kPartNames[expert_part_count] = {"w1", "w3", "w2"};  // gate, up, down

}  // namespace

Result<ExpertCatalog> v41_expert_catalog(const SafetensorsDir& d, const Config& c) {
  StExpertNames names;
  names.weight = [](int l, int e, int p) {
    return "layers." + std::to_string(l) + ".ffn.experts." + std::to_string(e) + "." + kPartNames[p] +
           ".weight";
  };
  names.scale = [w = names.weight](int l, int e, int p) { return scale_name_of(w(l, e, p)); };
  names.out[expert_part_gate] = names.out[expert_part_up] = c.moe_inter;
  names.in[expert_part_gate] = names.in[expert_part_up] = c.dim;
  names.out[expert_part_down] = c.dim;
  names.in[expert_part_down] = c.moe_inter;
  return ExpertCatalog::build_safetensors(d, names, c.n_layers, c.n_experts);
}

Result<std::unique_ptr<ExpertStore>> open_v41_expert_store(const SafetensorsDir& d, V41Model& m,
                                                           const ExpertStoreOptions& o) {
  const Config& c = m.cfg;
  if (m.numerics != V41Numerics::fast)
    return err(
        "checkpoint %s: the expert store (--expert-budget, expert statistics) serves the fast numerics, "
        "not --v41-numerics oracle",
        d.dir().c_str());
  ExpertBacking b;
  STRATA_ASSIGN(b.catalog, v41_expert_catalog(d, c));
  std::vector<const TensorView*> routers;
  std::vector<const float*> biases;
  for (int l = 0; l < c.n_layers; ++l) {
    LayerW& L = m.w.layers[static_cast<size_t>(l)];
    Mat* stack[expert_part_count] = {&L.xw1, &L.xw3, &L.xw2};
    for (int p = 0; p < expert_part_count; ++p) {
      const ExpertPart& q = b.catalog.layer(l).part[p];
      if (o.budget_bytes == 0) {
        STRATA_TRY(b.catalog.set_resident(l, p, stack[p]->tv));
        continue;
      }
      Mat& x = *stack[p];  // the views' type and shape; the bytes come from the store
      x.rows = q.slice0.ne[1];
      x.cols = q.slice0.ne[0];
      x.tv = q.slice0;
      x.tv.n_dims = 3;
      x.tv.ne[2] = c.n_experts;
      tensor_view_set_contiguous(&x.tv);
      x.tv.data = nullptr;
    }
    routers.push_back(&L.gate.tv);
    biases.push_back(L.gate_bias.data());
  }
  if (o.budget_bytes > 0 && o.prefetch && o.lookahead > 0) {
    STRATA_ASSIGN(RouterLookahead r,
                  RouterLookahead::from_views(routers, biases, c.n_experts, c.n_active,
                                              RouterScore::sqrt_softplus, 1.0f / c.gate_temp, "ffn.gate"));
    b.routers = std::make_unique<RouterLookahead>(std::move(r));
  }
  return expert_store_open(std::move(b), c.n_active, o);
}

}  // namespace strata::v41
