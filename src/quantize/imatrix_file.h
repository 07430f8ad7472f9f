// Importance matrices in llama.cpp's GGUF imatrix format (llama-imatrix, read by llama-quantize
// --imatrix), both directions: general.type = "imatrix", imatrix.datasets (array of strings),
// imatrix.chunk_count and imatrix.chunk_size (u32); per weight matrix W two F32 tensors,
// "W.in_sum2" [n_per_row, n_mat] (Σ x² of the activations each input column met, per expert for
// a 3-D bank; n_mat = 1 otherwise) and "W.counts" [1, n_mat] (activation rows summed per matrix).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace strata {

struct ImatrixEntry {
  int64_t n_per_row = 0;
  std::vector<float> sum2;    // [n_mat][n_per_row]
  std::vector<float> counts;  // [n_mat]
  int64_t n_mat() const { return static_cast<int64_t>(counts.size()); }
  // Column importance of matrix e (Σ x² / count), empty when no row reached it.
  std::vector<float> importance(int64_t e) const;
};

struct Imatrix {
  std::vector<std::string> datasets;
  uint32_t chunk_count = 0, chunk_size = 0;
  std::map<std::string, ImatrixEntry> entries;  // by weight tensor name
};

// Errors: not GGUF / not an imatrix, a sum without its counts (or the reverse), non-F32 tensors,
// shapes that disagree, non-finite or negative values; each naming the file and tensor.
Result<Imatrix> read_imatrix(const std::string& path);
Status write_imatrix(const Imatrix& m, const std::string& path);

}  // namespace strata
