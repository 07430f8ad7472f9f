// safetensors writer (the format of safetensors.h), streaming: each tensor's bytes come from a
// fill callback in chunks of at most kStFillChunk, so a file larger than RAM can be written with
// two chunk buffers (filling one while the other is written). Writes are pwrites of whole chunks;
// written ranges are flushed and dropped from the page cache as the file grows.
//
//   std::vector<StTensorOut> ts = {st_tensor_bytes("a.weight", StDtype::bf16, {2, 4}, bytes), ...};
//   STRATA_TRY(write_safetensors("m.safetensors", ts));
//   STRATA_ASSIGN(StDirWritten d, write_safetensors_dir("ckpt/", ts, 5'000'000'000));  // sharded
//
// write_safetensors_dir splits the tensors, in order, into shards of at most shard_bytes of data
// (a larger tensor is a shard alone), named model-0000i-of-0000n.safetensors as Hugging Face does,
// plus model.safetensors.index.json ({"metadata": {"total_size": N}, "weight_map": {...}}); one
// shard is written as model.safetensors without an index. Shards and an index already in the
// directory (files of those names) are removed first.
// Errors (a duplicate or empty name, a fill that fails, an I/O error) name the file and tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/safetensors.h"

namespace strata {

inline constexpr size_t kStFillChunk = size_t{64} << 20;

// Writes bytes [begin, begin + n) of a tensor's data to dst; begin is a multiple of kStFillChunk
// and n = min(kStFillChunk, rest). Called in order, from the writer's thread.
using StFill = std::function<Status(uint8_t* dst, size_t begin, size_t n)>;

struct StTensorOut {
  std::string name;
  StDtype dtype = StDtype::f32;
  std::vector<int64_t> shape;
  StFill fill;
  size_t nbytes() const;  // product(shape) * element size
};

// A tensor whose bytes are already in memory (tests, small tensors).
StTensorOut st_tensor_bytes(std::string name, StDtype dtype, std::vector<int64_t> shape,
                            std::vector<uint8_t> bytes);

// One file; returns its size in bytes.
Result<uint64_t> write_safetensors(const std::string& path, std::span<const StTensorOut> tensors,
                                   const std::map<std::string, std::string>& metadata = {});

struct StDirWritten {
  int n_shards = 0;
  uint64_t bytes = 0;  // all shard files
};
Result<StDirWritten> write_safetensors_dir(const std::string& dir, std::span<const StTensorOut> tensors,
                                           uint64_t shard_bytes);

}  // namespace strata
