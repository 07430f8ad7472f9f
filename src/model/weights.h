// Weight binding (style.md §6, calm-style): every tensor an architecture uses is looked up once
// at load with its expected shape and the set of types the kernels accept, so a bad file fails
// at load with "tensor 'blk.3.ffn_up_exps.weight': expected shape [64, 128, 8], got [64, 128, 4]"
// instead of computing garbage later.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"
#include "format/tensor_names.h"  // blk_name

namespace strata {

// A set of GgmlType values (bit i = type id i).
struct TypeSet {
  uint64_t bits = 0;
  constexpr TypeSet() = default;
  constexpr TypeSet(std::initializer_list<GgmlType> ts) {
    for (GgmlType t : ts) bits |= uint64_t{1} << static_cast<uint32_t>(t);
  }
  bool has(GgmlType t) const {
    const uint32_t i = static_cast<uint32_t>(t);
    return i < 64 && ((bits >> i) & 1);
  }
  std::string to_string() const;  // "f32, q8_0, ..."
};

// f32 only: norms, biases, sinks, routers.
TypeSet types_f32();
// Any weight type the matmul kernels can multiply (f32, f16, q8_0, q4_0, mxfp4, ...).
TypeSet types_matmul();
// Types whose rows can be dequantized for an embedding lookup.
TypeSet types_embedding();

class WeightBinder {
 public:
  explicit WeightBinder(const GgufFile& f) : f_(f) {}

  // The tensor `name` with exactly `shape` (ggml order, ne0 first; trailing dims are 1) and a
  // type in `types`; the error names the tensor and says expected vs actual.
  Result<const TensorView*> require(const std::string& name, std::initializer_list<int64_t> shape,
                                    TypeSet types) const;
  // As require(), but a missing tensor is nullptr (a present one is still checked).
  Result<const TensorView*> optional(const std::string& name, std::initializer_list<int64_t> shape,
                                     TypeSet types) const;
  // The two kinds most weights are: a matrix the kernels multiply (require with types_matmul())
  // and the values of an f32 tensor (norms, biases, sinks, mixing tables: require with
  // types_f32(), its data).
  Result<const TensorView*> matrix(const std::string& name, std::initializer_list<int64_t> shape) const;
  Result<const float*> f32(const std::string& name, std::initializer_list<int64_t> shape) const;
  // f32(), required or optional (a missing tensor is nullptr): biases present in some files only.
  Result<const float*> f32(const std::string& name, std::initializer_list<int64_t> shape,
                           bool required) const;
  // Presence test without checks (to pick between layouts).
  bool has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }
  const TensorView* find(const std::string& name) const { return f_.find_tensor(name); }

  const GgufFile& file() const { return f_; }

 private:
  Result<const TensorView*> check(const TensorView& t, std::initializer_list<int64_t> shape,
                                  TypeSet types) const;
  const GgufFile& f_;
};

}  // namespace strata
