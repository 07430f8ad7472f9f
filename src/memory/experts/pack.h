// Expert bundles (`strata pack MODEL -o FILE`): the routed experts of a GGUF rewritten for reads
// that bypass the page cache. Each expert's parts (gate, up, down, then any other per-expert
// tensor such as biases) are contiguous in one blob; every blob starts on a 4 KiB boundary and is
// padded to a multiple of 4 KiB, so one O_DIRECT read fetches one expert. Within a layer, experts
// are ordered so that co-activated experts sit together (from a routing trace; else by index),
// which lets neighbouring misses merge into longer reads.
//
// File layout (little-endian):
//   [0, 64)          header: "STRATAPK" | u32 version (1) | u32 alignment (4096) |
//                    u64 index_offset | u64 index_size | u64 data_offset | u64 file_size | zeros
//   [index_offset..) the index, JSON: {"format":"strata-pack","version":1,"alignment":4096,
//                    "source":{"path","size","tensors"},"n_layers","n_experts","order":[[...]],
//                    "experts":[{"layer","expert","offset","size","parts":[{"name","type","ne":[..],
//                    "offset","size"}]}]}   (expert offsets relative to data_offset, part offsets
//                    relative to their expert's blob; size = the parts' bytes, unpadded)
//   [data_offset..)  the blobs (data_offset is a multiple of 4096)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"
#include "memory/experts/routing_trace.h"
#include "quant/qtypes.h"

namespace strata {

inline constexpr uint32_t kPackAlignment = 4096;
inline constexpr uint32_t kPackVersion = 1;

struct PackPart {
  std::string name;  // GGUF tensor name, e.g. "blk.3.ffn_up_exps.weight"
  GgmlType type = GgmlType::f32;
  std::vector<int64_t> ne;  // shape of one expert's slice (ggml order)
  uint64_t offset = 0;      // inside the blob
  uint64_t size = 0;
};

struct PackExpert {
  int layer = 0, expert = 0;
  uint64_t offset = 0;  // blob start, relative to data_offset (multiple of 4096)
  uint64_t size = 0;    // bytes of the parts (the blob on disk is padded to 4096)
  std::vector<PackPart> parts;

  uint64_t padded_size() const { return (size + kPackAlignment - 1) / kPackAlignment * kPackAlignment; }
};

struct PackIndex {
  std::string path;  // the bundle
  std::string source_path;
  uint64_t source_size = 0;
  int64_t source_tensors = 0;
  int n_layers = 0, n_experts = 0;
  uint64_t data_offset = 0, file_size = 0;
  std::vector<std::vector<int>> order;  // [n_layers] expert ids in file order (empty for dense layers)
  std::vector<PackExpert> experts;      // sorted by (layer, expert)

  // nullptr when (layer, expert) is not in the bundle.
  const PackExpert* find(int layer, int expert) const;
};

struct PackOptions {
  const RoutingTrace* trace = nullptr;  // co-activation order; null: index order
};

// Writes the bundle (to path + ".tmp", renamed when complete). Errors: no routed experts, a trace
// whose grid does not match the model, I/O (naming the file).
Result<PackIndex> pack_write(const GgufFile& f, const std::string& path, const PackOptions& opts = {});
// Reads and validates header and index (magic, version, JSON, every blob aligned and inside the
// file, no overlaps, parts inside their blob, known types); errors name the file and problem.
Result<PackIndex> pack_read_index(const std::string& path);

// Order of a layer's experts so that co-activated ones are adjacent: start from the most requested,
// then repeatedly append the unplaced expert most often requested in the same token as the last
// one placed (ties: more requests, then lower id). Experts never requested come last by id.
std::vector<int> pack_coactivation_order(const RoutingTrace& t, int layer, int n_experts);

}  // namespace strata
