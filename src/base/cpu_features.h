// Run-time ISA detection (CPUID). Kernels are chosen once from this, never by -march=native.
#pragma once

namespace strata {

enum class Isa { scalar = 0, avx2 = 1, avx512 = 2 };

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512bf16 = false;
};

// What this CPU (and OS, via XGETBV) supports.
const CpuFeatures& cpu_features();

// Best ISA level this CPU supports: avx512 needs F+BW+VL+DQ+VNNI+BF16 (Zen 4, Sapphire Rapids),
// avx2 needs AVX2+FMA+F16C.
Isa cpu_best_isa();

// The ISA kernels should use: cpu_best_isa(), lowered by the environment variable
// STRATA_ISA=scalar|avx2|avx512 (never raised above what the CPU supports).
Isa active_isa();

bool isa_supported(Isa isa);
const char* isa_name(Isa isa);

}  // namespace strata
