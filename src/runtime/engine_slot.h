// The engine's request and slot records, shared by runtime/engine.cpp and runtime/engine_kv.cpp
// (private to the engine).
#pragma once

#include <memory>
#include <vector>

#include "runtime/engine.h"
#include "runtime/stop_strings.h"
#include "runtime/utf8_stream.h"

namespace strata {

// The request needs the logits of every prompt position, not only the last.
inline bool wants_prompt_rows(const CompletionParams& p) {
  return p.prompt_logits || p.prompt_logprobs >= 0;
}

struct Engine::Request {
  uint64_t id = 0;
  CompletionParams p;
  CompletionSink sink;
  double t_submit = 0;
};

struct Engine::Slot {
  Session* session = nullptr;
  std::unique_ptr<Session> owned;  // null: borrowed (create_borrowed)
  std::unique_ptr<Request> req;    // null: free
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<StopStrings> stops;
  Utf8Stream utf8;
  std::vector<float> logits;
  // The sequence's tokens by position: the prompt, then each sampled token as it enters a batch.
  std::vector<int32_t> seq;
  size_t target = 0;      // prefill evaluates seq up to here (the prompt; after a preemption, all of seq)
  size_t n_eval = 0;      // seq tokens evaluated by the prefill
  size_t n_chunk = 0;     // prefill tokens in this turn's batch
  bool ready = false;     // logits hold the next token's distribution (prefill done)
  uint64_t age = 0;       // admission order: preemption takes the youngest
  bool parked = false;    // preempted: waits for blocks, then recomputes seq[0, target)
  bool in_batch = false;  // in this turn's batch
  int n_cached = 0, n_recomputed = 0;
  int32_t next = 0;  // the sampled token in this turn's batch
  // Drawn from `logits` by Engine::presample (the turn's slots in parallel), not used yet: sample()
  // takes it instead of drawing (the same draw: the logits do not change until it is used, a
  // preemption recomputes them bit for bit). kNotDrawn: none.
  static constexpr int32_t kNotDrawn = -2;
  int32_t drawn = kNotDrawn;
  int n_gen = 0, n_decode = 0;
  std::vector<int32_t> pending;          // return_tokens: sampled ids not yet sent
  std::vector<TokenLogprob> pending_lp;  // logprobs: entries not yet sent
  double t_admit = 0, t_first = 0, t_last = 0, prompt_s = 0, decode_s = 0, sample_s = 0;
};

}  // namespace strata
