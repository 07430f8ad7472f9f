// `strata quantize`: convert a GGUF model's tensors to a file type (ftype.h) under a type policy
// (type_policy.h), byte-exact with llama-quantize v0.5.0 for what both write without an
// importance matrix.
//
//   auto plan = plan_quantize(*in, opts);          // every check; nothing written
//   STRATA_TRY(write_quantized(*in, *plan, opts, "out.gguf", progress));
//
// plan_quantize validates everything before any output: sources strata cannot dequantize,
// --policy layers outside the model, importance-matrix shapes that disagree with the tensor,
// requantizing without allow_requantize, target types strata cannot write, rows the target
// block does not divide. write_quantized converts each tensor as GgufWriter writes it (rows in
// parallel; one converted tensor in memory at a time), fails on non-finite source values naming
// the tensor, and writes to a temporary name renamed at the end, so a failed or interrupted run
// leaves no OUT (an interrupted one may leave OUT.tmp). Metadata is copied, with
// general.quantization_version = 2 and general.file_type = the llama_ftype number; the tensors
// are ordered as llama-quantize orders them (by layer, then name).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"
#include "quantize/imatrix_file.h"
#include "quantize/type_policy.h"

namespace strata {

struct QuantizeOptions {
  TypePolicy policy;
  bool allow_requantize = false;  // convert already-quantized sources (Q8_0, MXFP4, ...)
  int n_threads = 0;              // <= 0: all cores
  // --imatrix: tensors it covers whose type has an importance-weighted quantizer
  // (quant/weighted_quant.h) are quantized with it; its shapes must match the model's.
  const Imatrix* imatrix = nullptr;
  // The --imatrix path as given: with imatrix, the output gets llama-quantize's
  // quantize.imatrix.{file,dataset,entries_count,chunks_count} keys.
  std::string imatrix_file;
};

struct TensorPlan {
  const TensorView* src = nullptr;
  TypeChoice choice;     // choice.type: the output type
  bool convert = false;  // the type changes (else the bytes are copied)
  size_t out_bytes = 0;
  const ImatrixEntry* imatrix = nullptr;  // set when the weighted quantizer is used
};

struct QuantizePlan {
  std::vector<TensorPlan> tensors;  // in output order
  uint64_t in_bytes = 0, out_bytes = 0, n_elements = 0;
  int n_fallback = 0;  // tensors whose type rule 4 changed
  int n_weighted = 0;  // tensors quantized with the importance matrix
};

Result<QuantizePlan> plan_quantize(const GgufFile& in, const QuantizeOptions& opts);

// Called after each tensor is converted (done of total).
using QuantizeProgress = std::function<void(size_t done, size_t total, const TensorPlan& t)>;

Status write_quantized(const GgufFile& in, const QuantizePlan& plan, const QuantizeOptions& opts,
                       const std::string& out_path, const QuantizeProgress& progress = {});

}  // namespace strata
