#include "kernels/traits.h"

#include <array>

#include "kernels/x86/avx512/avx512_panel.h"
#include "kernels/x86/isa_kernels.h"

namespace strata {
namespace {

constexpr size_t kTypes = static_cast<size_t>(GgmlType::count);
using Table = std::array<KernelTraits, kTypes>;

Table make_table(Isa isa) {
  Table t;
  for (size_t i = 0; i < kTypes; ++i) {
    t[i].type = static_cast<GgmlType>(i);
    t[i].isa = isa;
    if (const QuantRef* r = quant_ref(static_cast<GgmlType>(i))) {
      t[i].vec_dot_type = r->vec_dot_type;
      t[i].to_float = r->to_float;
      t[i].from_float = r->from_float;
      t[i].vec_dot = r->vec_dot;
    }
  }
  if (isa == Isa::scalar) return t;
  // Each ISA level overrides what it implements; AVX-512 starts from the AVX2 set.
  x86::fill_avx2(t.data());
  if (isa == Isa::avx512) {
    x86::fill_avx512(t.data());
    x86::fill_avx512_panel(t.data());
  }
  for (auto& e : t) e.isa = isa;
  return t;
}

const Table& table(Isa isa) {
  static const Table scalar = make_table(Isa::scalar);
  static const Table avx2 = make_table(Isa::avx2);
  static const Table avx512 = make_table(Isa::avx512);
  switch (isa) {
    case Isa::avx2:
      return avx2;
    case Isa::avx512:
      return avx512;
    default:
      return scalar;
  }
}

}  // namespace

const KernelTraits& kernel_traits(GgmlType t, Isa isa) {
  static const KernelTraits kNone{};
  const size_t i = static_cast<size_t>(t);
  if (i >= kTypes) return kNone;
  return table(isa)[i];
}

const KernelTraits& kernel_traits(GgmlType t) {
  static const Isa isa = active_isa();
  return kernel_traits(t, isa);
}

}  // namespace strata
