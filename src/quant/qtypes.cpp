#include "quant/qtypes.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

#include "base/assert.h"

namespace strata {
namespace {

constexpr TypeInfo kUnknown{"unknown", 1, 0, false};

std::array<TypeInfo, static_cast<size_t>(GgmlType::count)> make_table() {
  std::array<TypeInfo, static_cast<size_t>(GgmlType::count)> t;
  t.fill(kUnknown);
  auto set = [&](GgmlType ty, const char* name, int64_t bs, size_t ts) {
    t[static_cast<size_t>(ty)] = TypeInfo{name, bs, ts, true};
  };
  set(GgmlType::f32, "f32", 1, 4);
  set(GgmlType::f16, "f16", 1, 2);
  set(GgmlType::q4_0, "q4_0", 32, 18);
  set(GgmlType::q4_1, "q4_1", 32, 20);
  set(GgmlType::q5_0, "q5_0", 32, 22);
  set(GgmlType::q5_1, "q5_1", 32, 24);
  set(GgmlType::q8_0, "q8_0", 32, 34);
  set(GgmlType::q8_1, "q8_1", 32, 36);
  set(GgmlType::q2_k, "q2_K", 256, 84);
  set(GgmlType::q3_k, "q3_K", 256, 110);
  set(GgmlType::q4_k, "q4_K", 256, 144);
  set(GgmlType::q5_k, "q5_K", 256, 176);
  set(GgmlType::q6_k, "q6_K", 256, 210);
  set(GgmlType::q8_k, "q8_K", 256, 292);
  set(GgmlType::iq2_xxs, "iq2_xxs", 256, 66);
  set(GgmlType::iq2_xs, "iq2_xs", 256, 74);
  set(GgmlType::iq3_xxs, "iq3_xxs", 256, 98);
  set(GgmlType::iq1_s, "iq1_s", 256, 50);
  set(GgmlType::iq4_nl, "iq4_nl", 32, 18);
  set(GgmlType::iq3_s, "iq3_s", 256, 110);
  set(GgmlType::iq2_s, "iq2_s", 256, 82);
  set(GgmlType::iq4_xs, "iq4_xs", 256, 136);
  set(GgmlType::i8, "i8", 1, 1);
  set(GgmlType::i16, "i16", 1, 2);
  set(GgmlType::i32, "i32", 1, 4);
  set(GgmlType::i64, "i64", 1, 8);
  set(GgmlType::f64, "f64", 1, 8);
  set(GgmlType::iq1_m, "iq1_m", 256, 56);
  set(GgmlType::bf16, "bf16", 1, 2);
  set(GgmlType::tq1_0, "tq1_0", 256, 54);
  set(GgmlType::tq2_0, "tq2_0", 256, 66);
  set(GgmlType::mxfp4, "mxfp4", 32, 17);
  set(GgmlType::nvfp4, "nvfp4", 64, 36);
  set(GgmlType::fp8_e4m3, "fp8_e4m3", 32, 33);  // strata's KV rows, never on disk
  return t;
}

const std::array<TypeInfo, static_cast<size_t>(GgmlType::count)>& table() {
  static const auto t = make_table();
  return t;
}

}  // namespace

const TypeInfo& type_info(uint32_t id) {
  if (id >= static_cast<uint32_t>(GgmlType::count)) return kUnknown;
  return table()[id];
}

size_t row_bytes(GgmlType t, int64_t n) {
  const TypeInfo& ti = type_info(t);
  STRATA_ASSERT(ti.known && n % ti.block_size == 0);
  return static_cast<size_t>(n / ti.block_size) * ti.type_size;
}

bool type_supported(GgmlType t) {
  switch (t) {
    case GgmlType::f32:
    case GgmlType::f16:
    case GgmlType::bf16:
    case GgmlType::q4_0:
    case GgmlType::q5_0:
    case GgmlType::q5_1:
    case GgmlType::q8_0:
    case GgmlType::q8_1:
    case GgmlType::q4_k:
    case GgmlType::q5_k:
    case GgmlType::q6_k:
    case GgmlType::q8_k:
    case GgmlType::mxfp4:
    case GgmlType::nvfp4:
      return true;
    default:
      return false;
  }
}

bool type_from_name(std::string_view name, GgmlType* out) {
  std::string lower(name);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (uint32_t i = 0; i < static_cast<uint32_t>(GgmlType::count); ++i) {
    const TypeInfo& ti = type_info(i);
    if (!ti.known) continue;
    std::string n(ti.name);
    for (auto& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (n == lower) {
      *out = static_cast<GgmlType>(i);
      return true;
    }
  }
  return false;
}

}  // namespace strata
