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
//
// A checkpoint directory (build_safetensors: DeepSeek-V4.1's official layout) holds each expert's
// parts as tensors of their own, in any of its shards (the backing files): BF16 [out, in] (one
// read, viewed in place like a GGUF part) or FP4 (E2M1 pairs [out, in/2] + a UE8M0 scale per 32
// [out, in/32]: two reads, then a transform). An FP4 part's region of the slot is
//
//   [ MXFP4 blocks, out x in/32 x 17 B ...........................]
//   [ gap >= scale bytes | codes cover          | scale cover     ]
//
// the codes and scales land behind the region's start, and transform() (called once the reads
// are in, before the expert is used) writes the MXFP4 blocks over them from the start, block by
// block (quant/fp8_fp4.h e2m1_pairs_to_mxfp4: the gap keeps every block's inputs ahead of its
// output), so the staging costs the slot about one scale tensor and the covers' page rounding, and
// slot_bytes() (what the tier allocates and the plan bills) includes it.
#pragma once

#include <cstddef>
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"
#include "format/tensor_names.h"

namespace strata {

class SafetensorsDir;  // format/safetensors_dir.h

// Indexes format/tensor_names.h's kRoutedExpertPartNames.
enum ExpertPartId {
  expert_part_gate = routed_expert_gate,
  expert_part_up = routed_expert_up,
  expert_part_down = routed_expert_down,
  expert_part_count = kRoutedExpertParts
};

struct ExpertPart {
  // View of expert 0's 2-D slice (name cleared) as the kernels take it; data = the mmapped address
  // (a checkpoint directory: the resident stack set_resident gave, else null)
  TensorView slice0;
  uint64_t file_offset = 0;  // GGUF: file offset of expert 0's slice
  size_t stride = 0;         // bytes between consecutive experts (= slice bytes)
  size_t slot_offset = 0;    // where this part's cover (FP4: region) starts inside a slot (4 KiB aligned)
  // checkpoint directory, FP4 parts: the tensors' [out, in/2] codes and [out, in/32] scales
  bool fp4 = false;
  size_t codes_bytes = 0, scale_bytes = 0;
  size_t codes_slot = 0, scale_slot = 0;  // where their covers land inside a slot
};

// One read that fills part of a slot: the aligned cover of [off, off + len) of backing file
// `file` lands at slot + slot_off.
struct ExpertSegment {
  int file = 0;
  uint64_t off = 0;
  size_t len = 0;
  size_t slot_off = 0;
};
inline constexpr int kMaxExpertSegments = 2 * expert_part_count;

struct ExpertBackingFile {
  std::string path;
  uint64_t size = 0;  // the size it must have (a file that changed is an error)
};

// How a checkpoint directory names its routed experts (the architecture knows): part p
// (ExpertPartId) of expert e of layer l is the tensor weight(l, e, p) of shape [out[p], in[p]]
// (PyTorch order), with its FP4 scale tensor scale(l, e, p).
struct StExpertNames {
  std::function<std::string(int l, int e, int p)> weight, scale;
  int64_t out[expert_part_count] = {}, in[expert_part_count] = {};
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
  // The routed experts of a checkpoint directory (every layer has them). Errors name the
  // directory, the shard, the tensor, expected vs actual: a tensor missing, of a dtype other than
  // I8/U8 (FP4) or BF16 or of the wrong shape, an FP4 weight without its F8_E8M0 scale or with a
  // scale that does not match its blocks, experts of one layer and part stored differently.
  static Result<ExpertCatalog> build_safetensors(const SafetensorsDir& d, const StExpertNames& names,
                                                 int n_layer, int n_expert);

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
  bool checkpoint_dir() const { return !st_seg_.empty(); }
  // What the store names as its backing: the GGUF, the bundle or the directory.
  const std::string& backing_path() const { return bundled() ? bundle_path_ : path_; }
  // The files the segments read (the GGUF or the bundle alone; a directory's shards with experts).
  const std::vector<ExpertBackingFile>& backing_files() const { return files_; }
  // The reads that fill a slot with expert e of layer l (at most kMaxExpertSegments): 3 for the
  // GGUF (part covers), 1 for a bundle (the blob), 1 per BF16 and 2 per FP4 part of a directory.
  int fill_segments(int l, int e, ExpertSegment* seg) const;
  // Whether a slot's bytes need transform() after their reads (a directory with FP4 parts).
  bool has_transform() const { return has_fp4_; }
  // FP4 parts of expert e of layer l, read into `slot`: the MXFP4 blocks written over the staged
  // codes and scales. Error (the slot is then garbage): a NaN scale (0xff), naming the shard, the
  // tensor and the block.
  Status transform(int l, int e, uint8_t* slot) const;
  // A directory's experts already resident as stacks {in, out, n_expert} (the model's own, for a
  // store without a budget: views then point into them). Error: a stack of another type or shape.
  Status set_resident(int l, int p, const TensorView& stack);

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
  std::vector<ExpertBackingFile> files_;
  // A directory's segments: [n_layer][n_expert][part][codes|scale] (file, offset); the scale of a
  // BF16 part unused.
  struct StSeg {
    int file = -1;
    uint64_t off = 0;
  };
  std::vector<StSeg> st_seg_;
  StExpertNames st_names_;  // for transform()'s errors
  bool has_fp4_ = false;
  const StSeg& st_seg(int l, int e, int p, int k) const {
    return st_seg_[((static_cast<size_t>(l) * static_cast<size_t>(n_expert_) + static_cast<size_t>(e)) *
                        expert_part_count +
                    static_cast<size_t>(p)) *
                       2 +
                   static_cast<size_t>(k)];
  }
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
