// Where each routed expert's bytes live in the backing GGUF, and how a fast-tier slot holds them.
//
// Expert e of layer l is the e-th 2-D slice of blk.<l>.ffn_{gate,up,down}_exps.weight: three byte
// ranges of the file, contiguous each but not 4 KiB aligned. A slot holds, per part, the aligned
// range covering the slice (what an O_DIRECT read returns), so the expert's bytes sit in the slot
// at the same address modulo 4 KiB as in the mmapped file and no bounce copy is needed:
//
//   slot: [ gate cover | up cover | down cover ]   each cover = io_align_up(end) - io_align_down(begin)
//
// Expert biases (gpt-oss) are small f32 tensors and stay in the mmapped file (resident).
// Layers without the three tensors (dense layers) have present == false.
//
// With a `strata pack` bundle attached (attach_bundle), the backing file is the bundle instead:
// each expert is one 4 KiB-aligned blob (gate | up | down | other per-expert parts), read with one
// O_DIRECT read into the start of a slot; slot_bytes() is then the largest padded blob.
#pragma once

#include <cstddef>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"
#include "format/tensor_names.h"

namespace strata {

// Indexes format/tensor_names.h's kRoutedExpertPartNames.
enum ExpertPartId {
  expert_part_gate = routed_expert_gate,
  expert_part_up = routed_expert_up,
  expert_part_down = routed_expert_down,
  expert_part_count = kRoutedExpertParts
};

struct ExpertPart {
  TensorView slice0;         // view of expert 0's 2-D slice (name cleared); data = mmapped address
  uint64_t file_offset = 0;  // file offset of expert 0's slice
  size_t stride = 0;         // bytes between consecutive experts (= slice bytes)
  size_t slot_offset = 0;    // where this part's cover starts inside a slot (4 KiB aligned)
};

struct ExpertLayerInfo {
  bool present = false;
  ExpertPart part[expert_part_count];
  size_t expert_bytes = 0;  // gate + up + down slice bytes of one expert
};

class ExpertCatalog {
 public:
  // Finds the expert tensors of layers 0 .. n_layer-1 (n_expert experts each). Errors: mismatched
  // expert counts, a tensor that is not 3-D, mapping offsets that cannot be located.
  static Result<ExpertCatalog> build(const GgufFile& f, int n_layer, int n_expert);

  int n_layer() const { return static_cast<int>(layers_.size()); }
  int n_expert() const { return n_expert_; }
  int n_present_layers() const;
  const ExpertLayerInfo& layer(int l) const { return layers_[static_cast<size_t>(l)]; }
  const std::string& path() const { return path_; }

  size_t slot_bytes() const { return slot_bytes_; }        // multiple of 4096
  uint64_t routed_bytes() const { return routed_bytes_; }  // all experts, all layers
  uint64_t dense_bytes() const { return dense_bytes_; }    // every other tensor of the file
  size_t expert_bytes(int l) const { return layer(l).expert_bytes; }

  // Makes the bundle the backing file (see above). Errors name the bundle and the problem: packed
  // from a different file (size or tensor count), a (layer, expert) missing, a part whose name,
  // type or size does not match the GGUF tensor.
  Status attach_bundle(const struct PackIndex& ix, const GgufFile& f);
  bool bundled() const { return !blob_off_.empty(); }
  const std::string& backing_path() const { return bundled() ? bundle_path_ : path_; }
  // The reads that fill a slot with expert e of layer l: (file offset, length, offset in the slot)
  // per segment; 3 for the GGUF (part covers), 1 for a bundle (the blob).
  int fill_segments(int l, int e, uint64_t* off, size_t* len, size_t* slot_off) const;

  // File range of part p of expert e of layer l.
  uint64_t part_offset(int l, int e, int p) const {
    const ExpertPart& q = layer(l).part[p];
    return q.file_offset + q.stride * static_cast<uint64_t>(e);
  }
  size_t part_bytes(int l, int p) const { return layer(l).part[p].stride; }
  // The 2-D view of part p of expert e when its covers sit in `slot` (host memory); with
  // slot == nullptr, the view into the mmapped file.
  TensorView view(int l, int e, int p, const uint8_t* slot) const;

 private:
  std::string path_, bundle_path_;
  int n_expert_ = 0;
  std::vector<uint64_t> blob_off_;  // [n_layer][n_expert] absolute bundle offsets (bundle mode)
  std::vector<uint64_t> blob_len_;  // [n_layer][n_expert] blob bytes (unpadded)
  std::vector<std::array<size_t, expert_part_count>> blob_part_;  // [n_layer] part offsets in a blob
  std::vector<ExpertLayerInfo> layers_;
  size_t slot_bytes_ = 0;
  uint64_t routed_bytes_ = 0;
  uint64_t dense_bytes_ = 0;
};

// Keeps the page cache out of the streamed experts: the kernel's fault read-around (read_ahead_kb,
// often MBs) would otherwise pull expert bytes next to every dense tensor into the page cache.
// Marks the whole mapping MADV_RANDOM and, with dense_willneed, asks for exactly the dense tensors
// (MADV_WILLNEED; not wanted when they are about to be loaded with gguf_load_dense_resident).
Status gguf_advise_streamed_experts(const GgufFile& f, bool dense_willneed = true);

// The file offset of a tensor's data in an mmapped GgufFile (its data pointer minus the mapping
// base, located by the GGUF magic at the page-aligned start of the mapping).
Result<uint64_t> gguf_tensor_file_offset(const GgufFile& f, const TensorView& t);

}  // namespace strata
