// Memory actually resident, measured and made so:
//   mem_resident_bytes        how much of a range is in RAM now (mincore): the measured side of the
//                             memory report (`run`/`bench` print it next to `strata plan`'s bill);
//   gguf_load_dense_resident  the dense weights of a mapped GGUF copied into anonymous RAM at the
//                             same addresses, read without the page cache (the expert store does this
//                             when a budget is set: dense weights resident and counted, design.md
//                             principle 1).
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "format/gguf.h"
#include "memory/io/io_file.h"

namespace strata {

// Bytes of the pages overlapping [p, p + n) that are resident (page granularity; 0 when mincore
// fails, e.g. for an unmapped range).
uint64_t mem_resident_bytes(const void* p, size_t n);

// Replaces the pages of f's mapping that hold non-expert tensors (every tensor whose name lacks
// "_exps.": embeddings, output, attention, norms, routers, shared experts) with anonymous pages at
// the same addresses, filled from `file` (f's own file, opened with io_open_file: O_DIRECT, so the
// page cache is neither used nor filled). Every TensorView stays valid and sees the same bytes;
// the pages are then RAM the process owns, all of them resident (mincore counts them), none of
// them the page cache's: measured dense bytes == the plan's dense_weights up to page rounding
// (a page shared with an expert tensor comes along whole). Returns the bytes made resident.
// Errors (the mapping is then partly replaced and must not be used): f not mapped from a file, a
// size mismatch between f and file, mmap failure, or a read error naming the file and offset.
Result<uint64_t> gguf_load_dense_resident(const GgufFile& f, IoFile& file);

}  // namespace strata
