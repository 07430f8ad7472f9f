// gguf_load_dense_resident (memory/mem_resident.h).
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "format/tensor_names.h"
#include "memory/experts/expert_store_catalog.h"
#include "memory/tier/mem_resident.h"

namespace strata {

Result<uint64_t> gguf_load_dense_resident(const GgufFile& f, IoFile& file) {
  if (file.opened_size() != f.file_size())
    return err("%s: %llu bytes, but the mapped model has %zu (file changed?)", file.path().c_str(),
               static_cast<unsigned long long>(file.opened_size()), f.file_size());
  // File-offset page ranges of the dense tensors, merged.
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  const TensorView* any = nullptr;
  for (const TensorView& t : f.tensors()) {
    if (t.nbytes == 0 || is_routed_expert(t.name)) continue;
    if (!any) any = &t;
    const uint64_t off =
        static_cast<uint64_t>(static_cast<const uint8_t*>(t.data) - static_cast<const uint8_t*>(any->data));
    ranges.push_back({off, off + t.nbytes});  // relative to `any` until the base is known
  }
  if (!any) return uint64_t{0};
  STRATA_ASSIGN(const uint64_t any_off, gguf_tensor_file_offset(f, *any));
  uint8_t* base = const_cast<uint8_t*>(static_cast<const uint8_t*>(any->data)) - any_off;
  for (auto& r : ranges) r = {io_align_down(r.first + any_off), io_align_up(r.second + any_off)};
  std::sort(ranges.begin(), ranges.end());
  uint64_t total = 0;
  for (size_t i = 0; i < ranges.size();) {
    uint64_t a = ranges[i].first, b = ranges[i].second;
    for (++i; i < ranges.size() && ranges[i].first <= b; ++i) b = std::max(b, ranges[i].second);
    void* p = ::mmap(base + a, b - a, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return err(
          "%s: cannot map %llu bytes of anonymous memory for the dense weights at file offset %llu: %s",
          f.path().c_str(), static_cast<unsigned long long>(b - a), static_cast<unsigned long long>(a),
          std::strerror(errno));
    // The last page may run past the end of the file: read what the file has (the rest stays 0,
    // as it was in the mapping).
    const uint64_t end = std::min<uint64_t>(b, f.file_size());
    STRATA_TRY(io_read_covering(file, base + a, a, static_cast<size_t>(end - a)));
    if (::mprotect(base + a, b - a, PROT_READ) != 0)
      return err("%s: mprotect of the dense weights at file offset %llu failed: %s", f.path().c_str(),
                 static_cast<unsigned long long>(a), std::strerror(errno));
    total += b - a;
  }
  return total;
}

}  // namespace strata
