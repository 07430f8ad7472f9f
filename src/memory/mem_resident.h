// How much of a memory range is resident in RAM now (mincore over its pages): the measured side of
// the memory report (`run`/`bench` print it next to `strata plan`'s bill).
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata {

// Bytes of the pages overlapping [p, p + n) that are resident (page granularity; 0 when mincore
// fails, e.g. for an unmapped range).
uint64_t mem_resident_bytes(const void* p, size_t n);

}  // namespace strata
