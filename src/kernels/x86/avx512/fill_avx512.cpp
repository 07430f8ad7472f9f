#include "kernels/x86/isa_kernels.h"

namespace strata::x86 {

void fill_avx512(KernelTraits* table) {
  (void)table;
}

}  // namespace strata::x86
