#include "memory/tier/mem_resident.h"

#include <sys/mman.h>
#include <unistd.h>

#include <vector>

namespace strata {

uint64_t mem_resident_bytes(const void* p, size_t n) {
  if (!p || n == 0) return 0;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t a0 = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  const uintptr_t a1 = (reinterpret_cast<uintptr_t>(p) + n + page - 1) & ~(page - 1);
  std::vector<unsigned char> vec((a1 - a0) / page);
  if (::mincore(reinterpret_cast<void*>(a0), a1 - a0, vec.data()) != 0) return 0;
  uint64_t pages = 0;
  for (unsigned char v : vec) pages += v & 1;
  return pages * page;
}

}  // namespace strata
