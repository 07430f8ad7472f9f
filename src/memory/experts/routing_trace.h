// Routing traces: which experts each token chose in each layer, one JSON object per line:
//   {"token_idx":t,"layer":l,"experts":[e0,e1,...],"weights":[w0,w1,...]}
// with, on decode steps of a store running the router look-ahead, what it predicted from this
// layer's input for the next layers (memory/replay_predict evaluates predictors on them):
//   "lookahead":[[experts for layer l+1],[for l+2],...]
// optionally preceded by one header line naming the model's expert grid:
//   {"strata_routing_trace":1,"n_layers":L,"n_experts":E,"top_k":k}
// `run --routing-trace-out` writes them (RoutingTraceWriter); `strata replay` and `strata pack
// --trace` read them (routing_trace_read). token_idx counts tokens over the whole run (prompt and
// generated), so it is the policies' logical clock.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace strata {

struct RoutingTraceMeta {
  int n_layers = 0;   // 0: unknown (then: max layer + 1 seen)
  int n_experts = 0;  // per layer; 0: unknown (then: max expert + 1 seen)
  int top_k = 0;      // 0: unknown (then: the longest experts list)
};

struct RoutingRecord {
  int64_t token_idx = 0;
  int32_t layer = 0;
  std::vector<int32_t> experts;                 // distinct, in router order
  std::vector<float> weights;                   // [experts.size()] or empty when not recorded
  std::vector<std::vector<int32_t>> lookahead;  // [d - 1]: predicted experts of layer + d; may be empty
};

struct RoutingTrace {
  RoutingTraceMeta meta;               // after reading: always filled (from the header or from the records)
  std::vector<RoutingRecord> records;  // by token_idx (stable: file order within a token)
};

// Parses trace text. Errors name the source, the line number and the problem (bad JSON, missing
// key, negative or out-of-grid ids, repeated expert in a line, weights of the wrong length).
// Records come back in token order: lines written layer-major by a prefill step (all tokens of
// layer 0, then of layer 1, ...) are stably sorted by token_idx.
Result<RoutingTrace> routing_trace_parse(const std::string& text, const std::string& source);
Result<RoutingTrace> routing_trace_read(const std::string& path);

// Per-(layer, expert) request counts of a trace: [n_layers][n_experts].
std::vector<std::vector<uint64_t>> routing_trace_counts(const RoutingTrace& t);

// Appends trace lines to a file. Not thread-safe: one writer, called from the thread that runs
// the forward. write() formats into a fixed buffer (no allocation per line).
class RoutingTraceWriter {
 public:
  // Truncates/creates path and writes the header line when meta has n_layers and n_experts.
  static Result<std::unique_ptr<RoutingTraceWriter>> open(const std::string& path,
                                                          const RoutingTraceMeta& meta);
  ~RoutingTraceWriter();
  RoutingTraceWriter(const RoutingTraceWriter&) = delete;
  RoutingTraceWriter& operator=(const RoutingTraceWriter&) = delete;

  // weights: empty, or one per expert.
  Status write(int64_t token_idx, int layer, std::span<const int32_t> experts,
               std::span<const float> weights);
  // Flushes and closes; errors name the file (a full disk shows up here).
  Status close();
  const std::string& path() const { return path_; }

 private:
  RoutingTraceWriter() = default;
  std::string path_;
  FILE* f_ = nullptr;
};

}  // namespace strata
