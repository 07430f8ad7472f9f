// `strata imatrix`: the importance matrix of a model over a calibration text — Σ x² per input
// column of every matmul weight (per expert for an expert bank) and the number of activation rows
// summed — collected by running the engine over the text in perplexity's windows (chunks of CTX
// tokens, each from a fresh session; runtime/perplexity.h) with an activation tap
// (kernels/activation_tap.h). The result is llama.cpp's GGUF imatrix (quantize/imatrix_file.h):
// chunk_size = CTX, chunk_count = windows, datasets = {the text's name}. output.weight is left
// out unless asked for (llama-imatrix's --process-output).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "model/model.h"
#include "quantize/imatrix_file.h"

namespace strata {

struct ImatrixCollectOptions {
  int n_ctx = 512;  // chunk (window) length; <= 0: the model's context, at most 4096
  int n_batch = 512;
  bool process_output = false;
  std::string dataset;  // recorded in imatrix.datasets
};

using ImatrixProgress = std::function<void(int chunk, int n_chunks)>;

// Errors: a text shorter than one chunk ("N tokens, fewer than one chunk of CTX"), a model with no
// tokenizer, eval errors; a matrix the engine ran whose activations could not be attributed to a
// tensor of the file (an expert bank not mapped from it).
Result<Imatrix> collect_imatrix(const Model& model, std::string_view text, const ImatrixCollectOptions& o,
                                const ImatrixProgress& progress = {});

}  // namespace strata
