// What quantization cost: a quantized model against its reference over the same tokens, in
// perplexity's windows (runtime/perplexity.h: non-overlapping windows of CTX tokens, each from a
// fresh session; the logits at position p score the token at p+1):
//   KLD(p)   = Σ_v P_ref(v|p) · (log P_ref(v|p) − log P_quant(v|p)), in double, per scored position
//   mean / P99 / max over the scored positions, top-1 agreement (same argmax), PPL of each model
//   and ΔPPL = PPL(quant) − PPL(ref);
//   routing consistency per MoE layer = mean over the scored positions of
//   |top-k(quant) ∩ top-k(ref)| / k, each model routing its own hidden states.
// The routing comes from the expert store's on_route observer (memory/experts/expert_store.h):
// load both models with LoadOptions::expert_stats and RoutingCapture::attach.
// second_half scores only positions CTX/2 .. CTX-2 of each window (the logits of the second half),
// as llama-perplexity --kl-divergence does.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/model.h"

namespace strata {

// Collects, per window, each routed layer's top-k for every position (see the file comment).
class RoutingCapture {
 public:
  // Sets opts->experts.on_route (and expert_stats, so that a resident store observes the routing).
  void attach(LoadOptions* opts);
  void begin_window(int n_ctx);
  // The k experts layer `layer` chose at position p of the current window; empty if not routed.
  std::span<const int32_t> chosen(int layer, int p) const;
  int k() const { return k_; }
  int n_layers() const { return static_cast<int>(sel_.size()); }

 private:
  void record(uint64_t token0, int layer, int64_t n, const int32_t* sel, int k);
  int n_ctx_ = 0, k_ = 0;
  uint64_t base_ = 0;
  bool have_base_ = false;
  std::vector<std::vector<int32_t>> sel_;  // [layer][p * k + j], -1 = not routed
};

struct KldOptions {
  int n_ctx = 0;  // window; <= 0: the reference's context_length, at most 4096
  int n_batch = 512;
  bool second_half = false;
  KvTypes kv = {};      // the quantized model's KV types; the reference's stay f32
  SeqKnobs knobs = {};  // the quantized model's per-sequence knobs (a profile's); the reference's: none
};

struct KldResult {
  int n_ctx = 0, windows = 0;
  int64_t scored = 0;  // positions compared
  double kld_mean = 0, kld_p99 = 0, kld_max = 0, kld_median = 0;
  double top1_agree = 0;  // fraction of positions with the same argmax
  double ppl_quant = 0, ppl_ref = 0;
  double dppl() const { return ppl_quant - ppl_ref; }
  // Per layer (index = layer): mean |top-k ∩ top-k| / k; -1 for layers that do not route.
  std::vector<double> routing;
  double seconds = 0;
};

using KldProgress = std::function<void(int window, int n_windows, double kld_running)>;

// Errors: different vocabularies, a text shorter than one window, CTX < 3 with second_half,
// eval errors, non-finite logits (naming the model and position). cq / cr may be null (no
// routing: KldResult::routing stays empty); both or neither.
Result<KldResult> kl_divergence(const Model& quant, const Model& ref, std::span<const int32_t> tokens,
                                const KldOptions& opts, RoutingCapture* cq, RoutingCapture* cr,
                                const KldProgress& progress = {});

// Loads both GGUF models (n_threads each; routing captured), tokenizes `text` with the reference's
// tokenizer (no BOS, specials not parsed) and runs kl_divergence. Errors name the file.
Result<KldResult> kl_divergence_of_files(const std::string& quant_path, const std::string& ref_path,
                                         std::string_view text, const KldOptions& opts, int n_threads,
                                         const KldProgress& progress = {});

// "mean KLD 0.0123 > 0.01" style checks of a result against gates (a negative gate is off):
// kld_max_mean bounds the mean KLD, routing_min every MoE layer's routing consistency. Returns
// the first failure as an error naming the number, the gate and (routing) the layer.
Status kld_gate(const KldResult& r, double kld_max_mean, double routing_min);

}  // namespace strata
