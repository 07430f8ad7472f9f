// Entry points of the ISA-specific kernel objects (compiled with their own -m flags, see
// src/CMakeLists.txt). fill_<isa>() overwrites the function pointers an ISA level implements
// in a table indexed by GgmlType id; only traits.cpp calls them, and only the ISA's functions
// run after the CPU check.
#pragma once

#include "kernels/traits.h"

namespace strata::x86 {

void fill_avx2(KernelTraits* table);
void fill_avx512(KernelTraits* table);

}  // namespace strata::x86
