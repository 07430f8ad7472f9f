#include "base/cpu_features.h"

#include <cpuid.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace strata {
namespace {

uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  const bool avx = c & (1u << 28);
  f.fma = c & (1u << 12);
  f.f16c = c & (1u << 29);
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = xgetbv0();
  const bool ymm_os = (xcr0 & 0x6) == 0x6;
  const bool zmm_os = (xcr0 & 0xe6) == 0xe6;
  if (!ymm_os) return f;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = b & (1u << 5);
  if (zmm_os) {
    f.avx512f = b & (1u << 16);
    f.avx512dq = b & (1u << 17);
    f.avx512bw = b & (1u << 30);
    f.avx512vl = b & (1u << 31);
    f.avx512vnni = c & (1u << 11);
    __cpuid_count(7, 1, a, b, c, d);
    f.avx512bf16 = a & (1u << 5);
  }
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

bool isa_supported(Isa isa) {
  const CpuFeatures& f = cpu_features();
  switch (isa) {
    case Isa::scalar:
      return true;
    case Isa::avx2:
      return f.avx2 && f.fma && f.f16c;
    case Isa::avx512:
      return isa_supported(Isa::avx2) && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq &&
             f.avx512vnni && f.avx512bf16;
  }
  return false;
}

Isa cpu_best_isa() {
  if (isa_supported(Isa::avx512)) return Isa::avx512;
  if (isa_supported(Isa::avx2)) return Isa::avx2;
  return Isa::scalar;
}

Isa active_isa() {
  static const Isa isa = [] {
    Isa best = cpu_best_isa();
    const char* env = std::getenv("STRATA_ISA");
    if (!env) return best;
    Isa want = best;
    if (!std::strcmp(env, "scalar"))
      want = Isa::scalar;
    else if (!std::strcmp(env, "avx2"))
      want = Isa::avx2;
    else if (!std::strcmp(env, "avx512"))
      want = Isa::avx512;
    return static_cast<int>(want) < static_cast<int>(best) ? want : best;
  }();
  return isa;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return "scalar";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "?";
}

}  // namespace strata
