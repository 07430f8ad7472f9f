// Engine: the serving core behind `strata serve` (and `strata run`, with one slot). It owns N slots
// (one Session each, created up front so their KV memory is known at start) and one scheduler
// thread that interleaves the requests placed in them, like llama-server's --parallel slots:
//
//   queue ──admit──► slot 0..N-1 ──► each scheduler turn builds ONE batch:
//                                     decode:  every decoding slot samples a token, releases its
//                                              text, and puts the token in the batch
//                                     prefill: prompt chunks of the other slots, under a token budget
//                                   ──► one BatchRunner::forward (split in steps of n_ubatch tokens)
//
// While slots decode, the prompt chunk of a turn is sized from measured turn times (PrefillPacer) so
// that every turn costs at most about PrefillPacer::kTarget (3) decode-only turns (decoding slots keep their
// pace while a long prompt arrives); with nothing decoding a turn takes up to n_batch prompt tokens. The
// forward is batch-invariant, so a request's tokens do not depend on what the other slots run, nor on how its
// prompt was chunked: a seeded request gives the same text on a busy server as alone.
//
//   auto e = Engine::create(*model, factory, &model->tokenizer(), model->n_vocab(), {.n_slots = 4}).value();
//   e->submit(params, [](const CompletionEvent& ev) { ...; return true; });  // false: cancel
//
// Paged KV (Engine::for_model on an architecture with Architecture::paged_kv(), the standard
// decoders): the slots' full-attention K / V live in one kv/KvPool under a byte budget
// (EngineOptions::kv_budget) and admission is by KV budget, not by slot — n_slots is the most
// sequences running. A request is admitted when the pool can hold its first prompt chunk (after
// the blocks of its longest cached prefix, which it shares: runtime/engine_kv.cpp); before each
// turn every sequence reserves the blocks its tokens need, and when the pool is short the
// youngest sequence is preempted: its blocks are released (its full blocks stay cached) and it is
// recomputed later from its tokens, with the same bits (batch invariance), its sampler untouched.
// A request whose KV can never fit is refused at submit() with its need and the budget.
//
// The sink is called on the scheduler thread and must not block for long.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "kv/kv_pool.h"
#include "memory/experts/device_experts.h"
#include "memory/experts/expert_store.h"
#include "model/model.h"
#include "obs/latency_histogram.h"
#include "runtime/grammar.h"
#include "runtime/logprobs.h"
#include "runtime/prefill_pacer.h"
#include "runtime/sampler.h"
#include "text/tokenizer.h"

namespace strata {

class GrammarVocab;

struct EngineOptions {
  int n_slots = 4;        // sequences in flight (llama-server --parallel)
  int max_queue = 64;     // requests waiting for a slot; beyond that submit() says the server is busy
  int n_batch = 2048;     // -b: tokens of one turn's batch at most (decodes + prompt chunks)
  int n_ubatch = 512;     // -ub: tokens per forward step (the sessions' scratch); a turn's batch is split
  int prefill_chunk = 0;  // > 0: fixed prompt tokens per turn while slots decode (tests); 0: from step times
  bool manual_step = false;  // tests: run no scheduler thread; step() drives it
  // Paged KV (for_model, architectures with paged KV): the pool's bytes (0: n_slots x n_ctx x
  // bytes per position) and positions per block; paged_kv false: every slot holds its whole context.
  uint64_t kv_budget = 0;
  int block_size = 16;
  bool paged_kv = true;
  bool prefix_cache = true;  // share the cached blocks of a prompt's longest cached prefix
  // Spill tiers of the prefix cache (kv/kv_spill.h): --cache-ram bytes of evicted blocks in RAM
  // (-1: as many as the pool holds; 0: none) and --prefix-cache-dir for them on SSD (persisted at
  // shutdown, read back after a restart; "": none) under --prefix-cache-dir-size bytes of files
  // (least recently used deleted past it; 0: no limit).
  int64_t cache_ram = -1;
  std::string prefix_cache_dir = {};
  uint64_t prefix_cache_dir_size = 0;
  bool kv_verbose = false;  // --verbose: a stderr line per prefix load-or-recompute decision
  // A model with sliding-window layers (gpt-oss): window-ring snapshots kept per slot (llama.cpp's
  // --ctx-checkpoints; kv/kv_checkpoints.h) for its prefix cache; 0: no prefix cache for it.
  int ctx_checkpoints = 8;
};

enum class FinishReason { stop, length, cancelled, error };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled", "error"

struct CompletionParams {
  std::vector<int32_t> prompt;  // token ids as evaluated (BOS included if the model wants one)
  int n_predict = -1;           // < 0: until end of generation or a full context; 0: the prompt only
  // Every prompt token's logits row reaches the sink (CompletionEvent::logits) as its chunk is
  // evaluated: scoring (perplexity, `strata logits`, an echo of the prompt's logprobs). With
  // n_predict 0 the prompt may fill the whole context.
  bool prompt_logits = false;
  // >= 0: every sampled token's logprob and the `logprobs` most likely tokens, from the raw logits
  // of its row (runtime/logprobs.h), in CompletionEvent::logprobs. An end-of-generation token that
  // stops the request is not part of them (nor of the text).
  int logprobs = -1;
  // >= 0: the same for prompt positions 1.. (each from the row before it), as their chunks are
  // evaluated, in CompletionEvent::prompt_logprobs (prompt scoring, OpenAI's echo).
  int prompt_logprobs = -1;
  SamplerParams sampling;
  // Only text this grammar accepts (runtime/grammar.h); end of generation only where it can end,
  // and the request stops (finish stop) as soon as nothing can follow. Null: unconstrained.
  std::shared_ptr<const Grammar> grammar;
  // The sequence's forward knobs (model/arch.h; a profile's, runtime/profile.h): they change its own
  // bits only, and its cached prefix blocks are shared only with sequences of the same knobs.
  SeqKnobs knobs;
  // Non-empty: the grammar is lazy (runtime/lazy_grammar.h): the text is free until this trigger
  // appears, and the grammar applies from the trigger on (OpenAI tool calls, tool_choice auto).
  std::string grammar_trigger;
  std::vector<std::string> stop;  // stop strings (not part of the output)
  bool ignore_eos = false;
  bool special = false;  // control tokens' text is part of the output
  // These control tokens' text is part of the output (tool-call markers the server parses out).
  std::vector<int32_t> shown_tokens = {};
  bool return_tokens = false;    // events carry the sampled token ids (llama-server's return_tokens)
  bool final_on_cancel = false;  // a cancelled request still gets its final event (finish = cancelled)
  // now_seconds() when the request reached the server (a server passes its accept / first byte);
  // queue, TTFT and end-to-end times count from it. 0: from submit().
  double t_arrival = 0;
};

struct CompletionEvent {
  std::string text;  // newly released text (complete UTF-8 characters; may be empty)
  bool done = false;
  FinishReason finish = FinishReason::stop;
  std::string error;            // finish == error
  std::vector<int32_t> tokens;  // return_tokens: the ids sampled since the previous event
  // prompt_logits: rows [n][n_vocab] of prompt positions logits_pos .. logits_pos+n-1 (row j: the
  // distribution after position logits_pos+j), valid during the call
  std::span<const float> logits;
  int64_t logits_pos = 0;
  std::vector<TokenLogprob>
      logprobs;  // CompletionParams::logprobs: the tokens sampled since the previous event
  std::vector<TokenLogprob> prompt_logprobs;  // CompletionParams::prompt_logprobs: this chunk's positions
  // Filled on the last event (n_decode: forward steps that evaluated a sampled token; n_cached:
  // prompt tokens whose KV came from the prefix cache, the others were prefilled; n_recomputed:
  // tokens evaluated again after the request was preempted):
  int n_prompt = 0, n_gen = 0, n_decode = 0, n_cached = 0, n_recomputed = 0;
  double queue_s = 0, prompt_s = 0, decode_s = 0, sample_s = 0, ttft_s = 0;
};
using CompletionSink = std::function<bool(const CompletionEvent&)>;

struct EngineCounters {
  uint64_t requests_ok = 0, requests_cancelled = 0, requests_failed = 0, requests_rejected = 0;
  uint64_t prompt_tokens = 0, gen_tokens = 0;
  uint64_t decode_steps = 0, decode_rows = 0;  // turns that evaluated sampled tokens, and those tokens
  uint64_t batches = 0, batch_tokens = 0;      // turns' batches (one forward call each) and their tokens
  // Paged KV: prompt tokens taken from the prefix cache / evaluated, tokens evaluated again after a
  // preemption, preemptions.
  uint64_t prompt_tokens_cached = 0, prompt_tokens_prefilled = 0, recomputed_tokens = 0, preemptions = 0;
  // Paged KV: sequences holding blocks after the last turn, and the most after any turn.
  int kv_sequences = 0, kv_sequences_max = 0;
  int running = 0, waiting = 0;
};

// One slot as seen from outside the scheduler (llama-server's /slots).
struct SlotInfo {
  int id = 0;
  bool processing = false;
  uint64_t request = 0;  // the request it holds (processing)
  int n_prompt = 0;      // that request's prompt tokens
  int n_predict = -1;    // and its token budget
};

// The paged KV pool an engine with options `o` makes for m's sessions of n_ctx positions (its
// budget, block size, prefix cache and spill tiers; o.n_slots sequences when no budget is given);
// null for an architecture that keeps its KV in its sessions. `strata bench` runs on one too.
Result<std::unique_ptr<KvPool>> make_kv_pool(const Model& m, int n_ctx, const KvTypes& kv,
                                             const EngineOptions& o);

class Engine {
 public:
  // Makes a slot's session; n_batch: the tokens one forward step takes (opts.n_ubatch).
  using SessionFactory = std::function<Result<std::unique_ptr<Session>>(int n_batch)>;

  // runner evaluates the sessions' batches (a Model; must outlive the engine). tok may be null only
  // for engines fed token ids whose text is not needed (tests).
  static Result<std::unique_ptr<Engine>> create(const BatchRunner& runner, const SessionFactory& make_session,
                                                const Tokenizer* tok, int32_t n_vocab,
                                                const EngineOptions& opts, ExpertStore* store = nullptr);
  // Over sessions the caller owns (one slot each; opts.n_slots is their count): they must outlive
  // the engine. `strata run` drives a one-slot engine this way (runtime/generate.h).
  static Result<std::unique_ptr<Engine>> create_borrowed(const BatchRunner& runner,
                                                         std::span<Session* const> sessions,
                                                         const Tokenizer* tok, int32_t n_vocab,
                                                         EngineOptions opts, ExpertStore* store = nullptr);
  // The same for a model's sessions (so.n_batch is replaced by opts.n_ubatch). A model without a
  // tokenizer gives an engine of token ids (no text, no end-of-generation check: `run --tokens`).
  static Result<std::unique_ptr<Engine>> for_model(const Model& m, const SessionOptions& so,
                                                   const EngineOptions& opts);
  ~Engine();  // stops the scheduler; unfinished requests end with error "server shutting down"

  // Checks the request (empty or too long prompt, token ids, sampler parameters, a full queue) and
  // queues it; returns its id. The sink then receives the text as it is generated.
  Result<uint64_t> submit(CompletionParams p, CompletionSink sink);

  int n_ctx() const { return n_ctx_; }
  int n_slots() const { return static_cast<int>(slots_.size()); }
  uint64_t kv_bytes() const { return kv_bytes_; }             // all slots' KV caches (and the KV pool)
  const ExpertStore* expert_store() const { return store_; }  // null: experts not tiered by a store
  // The model's routed experts on a GPU (for_model engines; null: none placed).
  const DeviceExperts* device_experts() const { return gpu_experts_; }
  const KvPool* kv_pool() const { return kv_pool_.get(); }  // null: slots hold their whole context
  const Session& session(int slot) const;                   // the slot's session (its KV and scratch bytes)
  bool manual_step() const { return opts_.manual_step; }

  // Runs one scheduler turn on the calling thread (manual_step engines only). False when idle.
  bool step();

  EngineCounters counters() const;
  std::vector<SlotInfo> slots() const;
  // Prometheus text: request counters, token counters, TTFT / time-per-output-token / queue /
  // end-to-end histograms, slots, KV bytes, the expert store's hit rate, bytes and stall, and the
  // routed experts run per tier (GPU / host) when experts are placed on a GPU.
  std::string metrics_text() const;
  double ttft_percentile(double q) const { return ttft_.percentile(q); }
  double tpot_percentile(double q) const { return tpot_.percentile(q); }

 private:
  struct Request;
  struct Slot;
  Engine() = default;
  static Result<std::unique_ptr<Engine>> make(const BatchRunner& runner, const Tokenizer* tok,
                                              int32_t n_vocab, const EngineOptions& opts, ExpertStore* store);
  void add_slot(Session* session, std::unique_ptr<Session> owned);
  void start();
  void loop();
  void admit();
  // Paged KV (runtime/engine_kv.cpp).
  Status make_kv_pool(const Model& m, int n_ctx, const KvTypes& kv);  // architectures with paged KV
  Status check_fits(const CompletionParams& p) const;
  bool place(Slot& s, bool resume);  // the slot's first blocks (a cached prefix shared); false: no room
  // s holds blocks for n positions (ok), younger sequences preempted; else it waits for older ones,
  // or holds every block the others do not (full: the pool is its context).
  enum class Secured { ok, wait, full };
  Secured secure(Slot& s, int64_t n);
  int64_t room(Slot& s, int64_t n);  // positions <= n that s can hold without preempting (reserved)
  Slot* victim(const Slot& s);       // the youngest preemptible sequence younger than s holding blocks
  void preempt(Slot& s);
  void unstick();           // a turn with nothing to run: preempt or fail so that the oldest can go on
  void committed(Slot& s);  // after a step: name the full blocks
  // A window-ring checkpoint of the slot's sequence (its prompt done, preempted or finished).
  void checkpoint(Slot& s);
  void presample(const std::vector<Slot*>& order);  // the turn's draws, in parallel
  void kv_metrics(const EngineCounters& c, std::string* out) const;
  bool sample(Slot& s);  // true: s has a sampled token to evaluate in this turn's batch
  int prefill_budget(int n_decode) const;
  void run_batch(int n_decode, int n_prefill);
  void finish(Slot& s, FinishReason r, const std::string& error = "");
  bool emit(Slot& s, const std::string& text);

  const Tokenizer* tok_ = nullptr;
  int32_t n_vocab_ = 0;
  int n_ctx_ = 0;
  uint64_t kv_bytes_ = 0;
  EngineOptions opts_;
  ExpertStore* store_ = nullptr;
  const DeviceExperts* gpu_experts_ = nullptr;
  std::unique_ptr<KvPool> kv_pool_;  // before the slots: their sessions' blocks go back to it
  uint64_t next_age_ = 0;            // admission order
  std::vector<std::unique_ptr<Slot>> slots_;
  const BatchRunner* runner_ = nullptr;
  // The turn's batch (reused): its slots in batch order, their sessions, and per token id, sequence
  // index and wants-logits flag.
  std::vector<Slot*> batch_slots_;
  std::vector<Session*> batch_sessions_;
  std::vector<int32_t> batch_tokens_, batch_seq_;
  std::vector<uint8_t> batch_want_;
  std::vector<float> batch_logits_;    // [n_slots][n_vocab]
  std::once_flag grammar_vocab_once_;  // built by the first request with a grammar
  std::shared_ptr<const GrammarVocab> grammar_vocab_;
  PrefillPacer pacer_;        // the prompt chunk beside decoding slots, from measured turn times
  uint64_t mixed_turns_ = 0;  // turns with decoders (every 8th is decode-only while prompts wait)

  mutable std::mutex mu_;  // queue_, counters_, stop_, the slots' req
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Request>> queue_;
  EngineCounters counters_;
  uint64_t next_id_ = 1;
  bool stop_ = false;

  LatencyHistogram ttft_, tpot_, queue_wait_, e2e_;
  std::thread thread_;
};

}  // namespace strata
