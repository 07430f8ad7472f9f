#include "model/weights.h"

namespace strata {

std::string TypeSet::to_string() const {
  std::string s;
  for (uint32_t i = 0; i < 64; ++i) {
    if (!((bits >> i) & 1)) continue;
    if (!s.empty()) s += ", ";
    s += type_info(i).name;
  }
  return s;
}

TypeSet types_f32() {
  return TypeSet{GgmlType::f32};
}

TypeSet types_matmul() {
  return TypeSet{GgmlType::f32,  GgmlType::f16,  GgmlType::bf16,  GgmlType::q8_0,
                 GgmlType::q4_0, GgmlType::q5_0, GgmlType::q5_1,  GgmlType::q4_k,
                 GgmlType::q5_k, GgmlType::q6_k, GgmlType::mxfp4, GgmlType::nvfp4};
}

TypeSet types_embedding() {
  return types_matmul();
}

namespace {

std::string shape_str(std::initializer_list<int64_t> shape) {
  std::string s = "[";
  bool first = true;
  for (int64_t v : shape) {
    if (!first) s += ", ";
    s += std::to_string(v);
    first = false;
  }
  return s + "]";
}

std::string shape_str(const TensorView& t) {
  std::string s = "[";
  for (int i = 0; i < (t.n_dims > 0 ? t.n_dims : 1); ++i) {
    if (i) s += ", ";
    s += std::to_string(t.ne[i]);
  }
  return s + "]";
}

}  // namespace

Result<const TensorView*> WeightBinder::check(const TensorView& t, std::initializer_list<int64_t> shape,
                                              TypeSet types) const {
  bool ok = true;
  int i = 0;
  for (int64_t v : shape) ok &= (i < kMaxDims && t.ne[i++] == v);
  for (; i < kMaxDims; ++i) ok &= (t.ne[i] == 1);
  if (!ok)
    return err("tensor '%s': expected shape %s, got %s", t.name.c_str(), shape_str(shape).c_str(),
               shape_str(t).c_str());
  if (!types.has(t.type))
    return err("tensor '%s': type %s not supported here (expected one of: %s)", t.name.c_str(),
               type_name(t.type), types.to_string().c_str());
  return &t;
}

Result<const TensorView*> WeightBinder::require(const std::string& name, std::initializer_list<int64_t> shape,
                                                TypeSet types) const {
  const TensorView* t = f_.find_tensor(name);
  if (!t) return err("tensor '%s': missing (expected shape %s)", name.c_str(), shape_str(shape).c_str());
  return check(*t, shape, types);
}

Result<const TensorView*> WeightBinder::optional(const std::string& name,
                                                 std::initializer_list<int64_t> shape, TypeSet types) const {
  const TensorView* t = f_.find_tensor(name);
  if (!t) return static_cast<const TensorView*>(nullptr);
  return check(*t, shape, types);
}

Result<const TensorView*> WeightBinder::matrix(const std::string& name,
                                               std::initializer_list<int64_t> shape) const {
  return require(name, shape, types_matmul());
}

Result<const float*> WeightBinder::f32(const std::string& name, std::initializer_list<int64_t> shape) const {
  return f32(name, shape, true);
}

Result<const float*> WeightBinder::f32(const std::string& name, std::initializer_list<int64_t> shape,
                                       bool required) const {
  STRATA_ASSIGN(const TensorView* t,
                required ? require(name, shape, types_f32()) : optional(name, shape, types_f32()));
  return t ? static_cast<const float*>(t->data) : nullptr;
}

}  // namespace strata
