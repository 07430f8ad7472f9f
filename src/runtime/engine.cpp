#include "runtime/engine.h"

#include <algorithm>
#include <cstdio>

#include "base/clock.h"
#include "base/parallel.h"
#include "obs/proc_mem.h"
#include "runtime/grammar_constraint.h"
#include "runtime/lazy_grammar.h"
#include "runtime/stop_strings.h"
#include "runtime/utf8_stream.h"
#include "runtime/engine_slot.h"

namespace strata {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::stop:
      return "stop";
    case FinishReason::length:
      return "length";
    case FinishReason::cancelled:
      return "cancelled";
    case FinishReason::error:
      return "error";
  }
  return "?";
}

Result<std::unique_ptr<Engine>> Engine::make(const BatchRunner& runner, const Tokenizer* tok, int32_t n_vocab,
                                             const EngineOptions& opts, ExpertStore* store) {
  if (opts.n_slots < 1 || opts.n_slots > 256) return err("--parallel %d must be in [1, 256]", opts.n_slots);
  if (opts.max_queue < 0) return err("queue size %d must be >= 0", opts.max_queue);
  if (opts.n_ubatch < 1) return err("--ubatch-size %d must be >= 1", opts.n_ubatch);
  if (opts.n_batch < opts.n_slots)
    return err("--batch-size %d must be at least --parallel %d (one decode token per slot)", opts.n_batch,
               opts.n_slots);
  if (opts.prefill_chunk < 0) return err("prefill chunk %d must be >= 0", opts.prefill_chunk);
  if (opts.block_size < 1 || opts.block_size > 4096)
    return err("--block-size %d must be in [1, 4096] positions", opts.block_size);
  if (n_vocab <= 0) return err("model has an empty vocabulary");
  std::unique_ptr<Engine> e(new Engine());
  e->runner_ = &runner;
  e->tok_ = tok;
  e->n_vocab_ = n_vocab;
  e->opts_ = opts;
  e->store_ = store;
  e->batch_logits_.resize(static_cast<size_t>(opts.n_slots) * static_cast<size_t>(n_vocab));
  return e;
}

void Engine::add_slot(Session* session, std::unique_ptr<Session> owned) {
  auto s = std::make_unique<Slot>();
  s->session = session;
  s->owned = std::move(owned);
  s->logits.resize(static_cast<size_t>(n_vocab_));
  n_ctx_ = session->n_ctx();
  kv_bytes_ += session->memory().kv_cache;
  slots_.push_back(std::move(s));
}

void Engine::start() {
  if (!opts_.manual_step) thread_ = std::thread([this] { loop(); });
}

Result<std::unique_ptr<Engine>> Engine::create(const BatchRunner& runner, const SessionFactory& make_session,
                                               const Tokenizer* tok, int32_t n_vocab,
                                               const EngineOptions& opts, ExpertStore* store) {
  STRATA_ASSIGN(std::unique_ptr<Engine> e, make(runner, tok, n_vocab, opts, store));
  for (int i = 0; i < opts.n_slots; ++i) {
    auto sess = make_session(opts.n_ubatch);
    if (!sess.ok()) return err_context("slot " + std::to_string(i), sess.error());
    Session* raw = sess->get();
    e->add_slot(raw, std::move(*sess));
  }
  e->start();
  return e;
}

Result<std::unique_ptr<Engine>> Engine::create_borrowed(const BatchRunner& runner,
                                                        std::span<Session* const> sessions,
                                                        const Tokenizer* tok, int32_t n_vocab,
                                                        EngineOptions opts, ExpertStore* store) {
  opts.n_slots = static_cast<int>(sessions.size());
  STRATA_ASSIGN(std::unique_ptr<Engine> e, make(runner, tok, n_vocab, opts, store));
  for (Session* s : sessions) e->add_slot(s, nullptr);
  e->start();
  return e;
}

Result<std::unique_ptr<Engine>> Engine::for_model(const Model& m, const SessionOptions& so,
                                                  const EngineOptions& opts) {
  const Tokenizer* tok = m.has_tokenizer() ? &m.tokenizer() : nullptr;  // null: token ids in and out
  STRATA_ASSIGN(std::unique_ptr<Engine> e, make(m, tok, m.n_vocab(), opts, m.expert_store()));
  e->gpu_experts_ = m.device_experts();
  SessionOptions o = so;
  o.n_batch = opts.n_ubatch;
  if (opts.paged_kv) {
    STRATA_TRY(e->make_kv_pool(m, so.n_ctx > 0 ? so.n_ctx : std::min(m.n_ctx_train(), 4096), so.kv));
    o.kv_pool = e->kv_pool_.get();
  }
  // The slots' batches run one at a time: one step scratch serves them all (the first slot's).
  for (int i = 0; i < opts.n_slots; ++i) {
    auto sess = m.new_session(o);
    if (!sess.ok()) return err_context("slot " + std::to_string(i), sess.error());
    if (i == 0) o.share_scratch = sess->get();
    Session* raw = sess->get();
    e->add_slot(raw, std::move(*sess));
  }
  e->start();
  return e;
}

const Session& Engine::session(int slot) const {
  return *slots_[static_cast<size_t>(slot)]->session;
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& s : slots_)
    if (s->req) finish(*s, FinishReason::error, "server shutting down");
  for (auto& r : queue_) {
    CompletionEvent ev;
    ev.done = true;
    ev.finish = FinishReason::error;
    ev.error = "server shutting down";
    r->sink(ev);
  }
  if (kv_pool_)  // every cached block to --prefix-cache-dir (nothing without one)
    if (Status st = kv_pool_->persist(); !st.ok())
      std::fprintf(stderr, "strata: KV cache: persisting the prefix cache: %s\n", st.message().c_str());
}

Result<uint64_t> Engine::submit(CompletionParams p, CompletionSink sink) {
  STRATA_TRY(sampler_params_validate(p.sampling));
  if (p.prompt.empty()) return err("prompt is empty");
  const int n = static_cast<int>(p.prompt.size());
  if (p.n_predict == 0 ? n > n_ctx_ : n >= n_ctx_)
    return err("prompt is %d tokens but the context of a slot is %d%s", n, n_ctx_,
               p.n_predict == 0 ? "" : " (need at least one free position)");
  for (int i = 0; i < n; ++i) {
    const int32_t t = p.prompt[static_cast<size_t>(i)];
    if (t < 0 || t >= n_vocab_)
      return err("token id %d at prompt position %d is outside the vocabulary (%d)", t, i, n_vocab_);
  }
  STRATA_TRY(check_fits(p));
  for (const auto& [id, bias] : p.sampling.logit_bias)
    if (id >= n_vocab_) return err("logit_bias: token id %d is outside the vocabulary (%d)", id, n_vocab_);
  if (p.grammar) {
    if (!tok_) return err("a grammar needs the engine's tokenizer");
    std::call_once(grammar_vocab_once_, [&] { grammar_vocab_ = std::make_shared<GrammarVocab>(*tok_); });
  }
  auto r = std::make_unique<Request>();
  r->p = std::move(p);
  r->sink = std::move(sink);
  r->t_submit = r->p.t_arrival > 0 ? std::min(r->p.t_arrival, now_seconds()) : now_seconds();
  uint64_t id;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_) return err("server shutting down");
    int free_slots = 0;
    for (auto& s : slots_) free_slots += s->req ? 0 : 1;
    if (static_cast<int>(queue_.size()) >= opts_.max_queue + free_slots) {
      ++counters_.requests_rejected;
      return err("server busy: %zu requests are waiting (queue limit %d); retry later", queue_.size(),
                 opts_.max_queue);
    }
    id = r->id = next_id_++;
    queue_.push_back(std::move(r));
    counters_.waiting = static_cast<int>(queue_.size());
  }
  cv_.notify_all();
  return id;
}

void Engine::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] {
        if (stop_ || !queue_.empty()) return true;
        for (auto& s : slots_)
          if (s->req) return true;
        return false;
      });
      if (stop_) return;
    }
    step();
  }
}

void Engine::admit() {
  std::lock_guard<std::mutex> lk(mu_);
  bool room = true;
  while (kv_pool_ && room) {  // preempted sequences first, the oldest first
    Slot* p = nullptr;
    for (auto& s : slots_)
      if (s->req && s->parked && (!p || s->age < p->age)) p = s.get();
    if (!p) break;
    room = place(*p, true);
  }
  for (auto& s : slots_) {
    if (!room) break;  // nothing new while a preempted sequence waits, nor past a request that does not fit
    if (s->req || queue_.empty()) continue;
    s->req = std::move(queue_.front());
    queue_.pop_front();
    s->session->reset();
    s->session->set_knobs(s->req->p.knobs);
    s->seq = s->req->p.prompt;
    s->target = s->seq.size();
    s->n_eval = 0;
    s->n_cached = s->n_recomputed = 0;
    s->parked = false;
    s->age = next_age_++;
    if (kv_pool_ && !place(*s, false)) {
      queue_.push_front(std::move(s->req));
      room = false;
      break;
    }
    s->sampler = std::make_unique<Sampler>(s->req->p.sampling, n_vocab_);
    s->sampler->accept_prompt(s->req->p.prompt);
    if (s->req->p.grammar && !s->req->p.grammar_trigger.empty())
      s->sampler->set_constraint(std::make_unique<LazyGrammarConstraint>(s->req->p.grammar, grammar_vocab_,
                                                                         s->req->p.grammar_trigger));
    else if (s->req->p.grammar)
      s->sampler->set_constraint(std::make_unique<GrammarConstraint>(s->req->p.grammar, grammar_vocab_));
    s->stops = std::make_unique<StopStrings>(s->req->p.stop);
    s->utf8 = Utf8Stream();
    s->ready = false;
    s->n_gen = s->n_decode = 0;
    s->pending.clear();
    s->pending_lp.clear();
    s->t_admit = now_seconds();
    s->t_first = s->t_last = s->prompt_s = s->decode_s = s->sample_s = 0;
    queue_wait_.add(s->t_admit - s->req->t_submit);
  }
  int running = 0;
  for (auto& s : slots_) running += s->req ? 1 : 0;
  counters_.running = running;
  counters_.waiting = static_cast<int>(queue_.size());
}

// Prompt tokens this turn may take beside n_decode decode tokens. Alone, a prompt takes the whole
// batch; beside decoding slots, the pacer's chunk (runtime/prefill_pacer.h).
int Engine::prefill_budget(int n_decode) const {
  const int room = opts_.n_batch - n_decode;
  if (n_decode == 0 || room <= 0) return std::max(room, 0);
  if (opts_.prefill_chunk > 0) return std::min(room, opts_.prefill_chunk);
  return pacer_.chunk(room);
}

// One turn: admit; every decoding slot samples its next token into the batch; prompt chunks fill
// the rest of the budget; one forward for all of it.
bool Engine::step() {
  admit();
  bool did = false;
  for (auto& s : slots_) s->in_batch = false;
  // The running sequences, oldest first (with paged KV the older ones reserve first).
  std::vector<Slot*> order;
  for (auto& s : slots_)
    if (s->req && !s->parked) order.push_back(s.get());
  std::sort(order.begin(), order.end(), [](const Slot* a, const Slot* b) { return a->age < b->age; });
  batch_slots_.clear();
  batch_sessions_.clear();
  batch_tokens_.clear();
  batch_seq_.clear();
  batch_want_.clear();
  auto add = [&](Slot& s, std::span<const int32_t> toks, bool want_last) {
    const int32_t seq = static_cast<int32_t>(batch_sessions_.size());
    const bool all = s.n_chunk > 0 && wants_prompt_rows(s.req->p);
    batch_slots_.push_back(&s);
    batch_sessions_.push_back(s.session);
    s.in_batch = true;
    for (size_t i = 0; i < toks.size(); ++i) {
      batch_tokens_.push_back(toks[i]);
      batch_seq_.push_back(seq);
      batch_want_.push_back(all || (want_last && i + 1 == toks.size()) ? 1 : 0);
    }
  };
  presample(order);
  int n_decode = 0;
  for (Slot* s : order) {
    if (!s->req || s->parked || !s->ready) continue;
    did = true;
    s->n_chunk = 0;
    const Secured sec = kv_pool_ ? secure(*s, s->session->n_past() + 1) : Secured::ok;
    if (sec == Secured::wait) continue;
    if (sec == Secured::full) {  // as with a full context: the token is sampled, then it ends
      if (sample(*s)) finish(*s, FinishReason::length);
      continue;
    }
    if (sample(*s)) {
      s->seq.push_back(s->next);
      add(*s, std::span<const int32_t>(&s->next, 1), true);
      ++n_decode;
    }
  }
  int budget = prefill_budget(n_decode), n_prefill = 0;
  size_t n_rows_extra = 0;  // wanted rows beyond one per slot (prompt_logits chunks)
  // Every kProbeEvery-th turn with decoders and pending prompts is decode-only (and the first, when
  // no decode-only turn was measured yet): it keeps the pacer's decode step current as the
  // sequences' contexts (and so their steps) grow.
  constexpr int kProbeEvery = 8;
  if (n_decode > 0 && opts_.prefill_chunk == 0 &&
      (++mixed_turns_ % kProbeEvery == 0 || pacer_.decode_s() <= 0))
    budget = 0;
  for (Slot* s : order) {
    if (!s->req || s->parked || s->ready) continue;
    did = true;
    s->n_chunk = 0;
    size_t n = std::min(s->target - s->n_eval, static_cast<size_t>(std::max(budget, 0)));
    if (n > 0 && kv_pool_) n = static_cast<size_t>(room(*s, static_cast<int64_t>(n)));
    if (n == 0) continue;
    s->n_chunk = n;
    add(*s, std::span<const int32_t>(s->seq.data() + s->n_eval, n), s->n_eval + n == s->target);
    if (wants_prompt_rows(s->req->p)) n_rows_extra += n - 1;
    budget -= static_cast<int>(n);
    n_prefill += static_cast<int>(n);
  }
  if (!batch_tokens_.empty()) {
    const size_t rows = batch_slots_.size() + n_rows_extra;
    if (batch_logits_.size() < rows * static_cast<size_t>(n_vocab_))
      batch_logits_.resize(rows * static_cast<size_t>(n_vocab_));
    run_batch(n_decode, n_prefill);
  } else if (kv_pool_ && did) {
    unstick();
  }
  return did;
}

void Engine::run_batch(int n_decode, int n_prefill) {
  TokenBatch b;
  b.tokens = batch_tokens_;
  b.seq = batch_seq_;
  b.logits = batch_want_;
  const double t0 = now_seconds();
  const Status st = runner_->forward(batch_sessions_, b, batch_logits_.data());
  const double dt = now_seconds() - t0;
  if (st.ok() && n_decode > 0 && n_prefill == 0) pacer_.observe_decode(dt);
  if (st.ok() && n_decode > 0 && n_prefill > 0) pacer_.observe_mixed(n_prefill, dt);
  if (st.ok() && n_decode == 0 && n_prefill > 0 && kv_pool_) kv_pool_->observe_prefill(n_prefill, dt);
  size_t row = 0;
  for (Slot* s : batch_slots_) {
    const bool decoding = s->n_chunk == 0;
    (decoding ? s->decode_s : s->prompt_s) += dt;
    s->n_decode += decoding ? 1 : 0;
    if (!st.ok()) {
      finish(*s, FinishReason::error, st.message());
      continue;
    }
    if (kv_pool_) committed(*s);
    const size_t V = static_cast<size_t>(n_vocab_);
    const CompletionParams& p = s->req->p;
    if (!decoding && wants_prompt_rows(p)) {  // every row of the chunk, then the last as usual
      CompletionEvent ev;
      const std::span<const float> rows(batch_logits_.data() + row * V, s->n_chunk * V);
      if (p.prompt_logits) {
        ev.logits = rows;
        ev.logits_pos = static_cast<int64_t>(s->n_eval);
      }
      for (size_t j = 0; p.prompt_logprobs >= 0 && j < s->n_chunk; ++j) {
        const size_t next = s->n_eval + j + 1;  // row j predicts this prompt position
        if (next < p.prompt.size())
          ev.prompt_logprobs.push_back(
              token_logprob(rows.subspan(j * V, V), p.prompt[next], p.prompt_logprobs));
      }
      row += s->n_chunk - 1;
      if (!s->req->sink(ev)) {
        ++row;
        finish(*s, FinishReason::cancelled);
        continue;
      }
    }
    s->n_eval += s->n_chunk;
    if (!decoding && s->n_eval == s->target) checkpoint(*s);  // its prompt done: a prefix others may share
    if (decoding || s->n_eval == s->target) {
      const float* src = batch_logits_.data() + row * V;
      std::copy(src, src + n_vocab_, s->logits.begin());
      s->ready = true;
      ++row;
    } else if (wants_prompt_rows(p)) {
      ++row;
    }
  }
  int holding = 0;  // sequences whose KV is in the pool after this turn (read on this thread)
  if (kv_pool_)
    for (const auto& sl : slots_) holding += sl->session->kv_blocks()->size() > 0 ? 1 : 0;
  std::lock_guard<std::mutex> lk(mu_);
  ++counters_.batches;
  counters_.batch_tokens += batch_tokens_.size();
  counters_.kv_sequences = holding;
  counters_.kv_sequences_max = std::max(counters_.kv_sequences_max, holding);
  if (n_decode > 0) {
    ++counters_.decode_steps;
    counters_.decode_rows += static_cast<uint64_t>(n_decode);
  }
}

bool Engine::emit(Slot& s, const std::string& text) {
  if (text.empty() && s.pending.empty() && s.pending_lp.empty()) return true;
  CompletionEvent ev;
  ev.text = text;
  ev.tokens = std::move(s.pending);
  s.pending.clear();
  ev.logprobs = std::move(s.pending_lp);
  s.pending_lp.clear();
  return s.req->sink(ev);
}

// The draws of every slot about to sample this turn, in parallel on the runner's threads (each
// slot's sampler, grammar and logits are its own; the draws are the ones sample() would make).
void Engine::presample(const std::vector<Slot*>& order) {
  ThreadPool* pool = runner_->idle_pool();
  if (!pool || pool->size() < 2) return;
  std::vector<Slot*> todo;
  for (Slot* s : order)
    if (s->req && !s->parked && s->ready && s->drawn == Slot::kNotDrawn && s->req->p.n_predict != 0)
      todo.push_back(s);
  if (todo.size() < 2) return;
  parallel_items(*pool, static_cast<int64_t>(todo.size()), true, [&](int64_t i, int) {
    Slot& s = *todo[static_cast<size_t>(i)];
    const double t0 = now_seconds();
    s.drawn = s.sampler->sample(s.logits.data());
    s.sample_s += now_seconds() - t0;
  });
}

// Samples from the slot's logits and releases the text; true when the token is to be evaluated.
bool Engine::sample(Slot& s) {
  Request& r = *s.req;
  if (r.p.n_predict == 0) return finish(s, FinishReason::length), false;  // the prompt only
  const double t0 = now_seconds();
  int32_t tok = s.drawn;
  if (tok == Slot::kNotDrawn)
    tok = s.sampler->sample(s.logits.data());
  else
    s.drawn = Slot::kNotDrawn;
  if (tok < 0) {  // the grammar allows no token
    if (s.sampler->constraint()->can_end()) return finish(s, FinishReason::stop), false;
    return finish(s, FinishReason::error, "the grammar allows none of the model's tokens here"), false;
  }
  s.sampler->accept(tok);
  ++s.n_gen;
  if (r.p.return_tokens) s.pending.push_back(tok);
  const double now = now_seconds();
  s.sample_s += now - t0;
  if (s.n_gen == 1) {
    s.t_first = now;
    ttft_.add(now - r.t_submit);
  } else {
    tpot_.add(now - s.t_last);
  }
  s.t_last = now;
  if (tok_ && tok_->is_eog(tok) && !r.p.ignore_eos) return finish(s, FinishReason::stop), false;
  if (r.p.logprobs >= 0) s.pending_lp.push_back(token_logprob(s.logits, tok, r.p.logprobs));
  std::string out;
  bool hit = false;
  const bool shown = r.p.special || std::find(r.p.shown_tokens.begin(), r.p.shown_tokens.end(), tok) !=
                                        r.p.shown_tokens.end();
  if (tok_) hit = s.stops->push(s.utf8.push(tok_->token_to_piece(tok, shown)), &out);
  if (!emit(s, out)) return finish(s, FinishReason::cancelled), false;
  if (hit) return finish(s, FinishReason::stop), false;
  if (s.sampler->constraint() && s.sampler->constraint()->complete())
    return finish(s, FinishReason::stop), false;
  if (r.p.n_predict >= 0 && s.n_gen >= r.p.n_predict) return finish(s, FinishReason::length), false;
  if (s.session->n_past() >= s.session->n_ctx()) return finish(s, FinishReason::length), false;
  s.next = tok;
  return true;
}

void Engine::finish(Slot& s, FinishReason reason, const std::string& error) {
  Request& r = *s.req;
  CompletionEvent ev;
  if (tok_ && reason != FinishReason::error && reason != FinishReason::cancelled) {
    std::string tail;
    if (s.stops->push(s.utf8.flush(), &tail)) reason = FinishReason::stop;
    s.stops->flush(&tail);
    ev.text = tail;
  }
  ev.done = true;
  ev.finish = reason;
  ev.error = error;
  ev.tokens = std::move(s.pending);
  s.pending.clear();
  ev.logprobs = std::move(s.pending_lp);
  s.pending_lp.clear();
  ev.n_prompt = static_cast<int>(r.p.prompt.size());
  ev.n_gen = s.n_gen;
  ev.n_decode = s.n_decode;
  ev.n_cached = s.n_cached;
  ev.n_recomputed = s.n_recomputed;
  ev.sample_s = s.sample_s;
  ev.queue_s = s.t_admit > 0 ? s.t_admit - r.t_submit : 0;
  ev.prompt_s = s.prompt_s;
  ev.decode_s = s.decode_s;
  ev.ttft_s = s.t_first > 0 ? s.t_first - r.t_submit : 0;
  // Counted before the client hears the end: whoever reads the counters after a response sees it.
  e2e_.add(now_seconds() - r.t_submit);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (reason == FinishReason::cancelled)
      ++counters_.requests_cancelled;
    else if (reason == FinishReason::error)
      ++counters_.requests_failed;
    else
      ++counters_.requests_ok;
    counters_.prompt_tokens += std::min(s.n_eval, r.p.prompt.size());
    counters_.gen_tokens += static_cast<uint64_t>(s.n_gen);
    counters_.running = std::max(0, counters_.running - 1);
  }
  if (reason != FinishReason::cancelled || r.p.final_on_cancel) r.sink(ev);
  {
    std::lock_guard<std::mutex> lk(mu_);
    s.req.reset();  // under mu_: submit() counts free slots from other threads
  }
  s.sampler.reset();
  s.drawn = Slot::kNotDrawn;
  s.stops.reset();
  s.parked = s.ready = false;
  if (kv_pool_ && reason != FinishReason::error) checkpoint(s);  // a later turn may continue it
  if (kv_pool_) s.session->reset();  // the blocks go back (the full ones stay cached)
}

EngineCounters Engine::counters() const {
  std::lock_guard<std::mutex> lk(mu_);
  return counters_;
}

std::vector<SlotInfo> Engine::slots() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<SlotInfo> out(slots_.size());
  for (size_t i = 0; i < slots_.size(); ++i) {
    out[i].id = static_cast<int>(i);
    if (const Request* r = slots_[i]->req.get()) {
      out[i].processing = true;
      out[i].request = r->id;
      out[i].n_prompt = static_cast<int>(r->p.prompt.size());
      out[i].n_predict = r->p.n_predict;
    }
  }
  return out;
}

std::string Engine::metrics_text() const {
  const EngineCounters c = counters();
  const ExpertTotals t = store_ ? store_->totals() : ExpertTotals{};  // the store locks its own statistics
  std::string o;
  auto counter = [&](const char* n, const char* help, double v) {
    prometheus_scalar(n, "counter", help, v, &o);
  };
  auto gauge = [&](const char* n, const char* help, double v) { prometheus_scalar(n, "gauge", help, v, &o); };
  counter("strata_requests_success_total", "requests that finished (stop or length)",
          static_cast<double>(c.requests_ok));
  counter("strata_requests_cancelled_total", "requests whose client went away",
          static_cast<double>(c.requests_cancelled));
  counter("strata_requests_failed_total", "requests that ended with an error",
          static_cast<double>(c.requests_failed));
  counter("strata_requests_rejected_total", "requests refused because the queue was full",
          static_cast<double>(c.requests_rejected));
  counter("strata_prompt_tokens_total", "prompt tokens evaluated", static_cast<double>(c.prompt_tokens));
  counter("strata_generation_tokens_total", "tokens generated", static_cast<double>(c.gen_tokens));
  gauge("strata_requests_running", "requests in a slot", c.running);
  gauge("strata_requests_waiting", "requests waiting for a slot", c.waiting);
  gauge("strata_slots", "slots (sequences in flight at most)", static_cast<double>(slots_.size()));
  counter("strata_decode_steps_total", "turns that evaluated sampled tokens (one batch each)",
          static_cast<double>(c.decode_steps));
  counter("strata_decode_rows_total", "sampled tokens evaluated by those turns",
          static_cast<double>(c.decode_rows));
  counter("strata_batches_total", "turns' batches (decode tokens and prompt chunks in one forward)",
          static_cast<double>(c.batches));
  counter("strata_batch_tokens_total", "tokens in those batches", static_cast<double>(c.batch_tokens));
  gauge("strata_kv_cache_bytes", "KV cache bytes of all slots and the KV pool",
        static_cast<double>(kv_bytes_));
  if (kv_pool_) kv_metrics(c, &o);
  gauge("strata_process_resident_bytes", "resident set of the process (VmRSS)",
        static_cast<double>(rss_bytes()));
  gauge("strata_process_peak_resident_bytes", "peak resident set of the process (VmHWM)",
        static_cast<double>(peak_rss_bytes()));
  ttft_.prometheus("strata_time_to_first_token_seconds", "request arrival to its first token", &o);
  tpot_.prometheus("strata_time_per_output_token_seconds", "time between two tokens of a request", &o);
  queue_wait_.prometheus("strata_queue_wait_seconds", "request arrival to its slot", &o);
  e2e_.prometheus("strata_request_latency_seconds", "request arrival to its last token", &o);
  if (store_) {
    gauge("strata_expert_hit_rate", "routed expert accesses served from the fast tier", t.hit_rate());
    counter("strata_expert_misses_total", "routed expert accesses that waited for a read",
            static_cast<double>(t.misses));
    counter("strata_expert_read_bytes_total", "bytes read from the expert backing file",
            static_cast<double>(t.bytes_read));
    counter("strata_expert_stall_seconds_total", "compute time spent waiting on expert reads", t.stall_s);
  }
  if (gpu_experts_) {  // the GPU tier: experts resident there, and the routed slots run per tier
    const DeviceExpertTotals g = gpu_experts_->totals();
    const DeviceExpertPlan& p = gpu_experts_->plan();
    gauge("strata_expert_gpu_resident", "routed experts held by the GPU", p.n_placed);
    gauge("strata_expert_gpu_bytes", "bytes of routed experts on the GPU", static_cast<double>(p.bytes));
    counter("strata_expert_gpu_runs_total", "routed (token, expert) pairs computed on the GPU",
            static_cast<double>(g.gpu_slots));
    counter("strata_expert_host_runs_total", "routed (token, expert) pairs computed on the host",
            static_cast<double>(g.host_slots));
    gauge("strata_expert_gpu_runs_per_token", "routed experts run on the GPU per token", g.gpu_per_token());
    gauge("strata_expert_host_runs_per_token", "routed experts run on the host per token",
          g.host_per_token());
    // The miss policy (--miss-policy): experts not resident on the GPU.
    counter("strata_expert_miss_host_total", "missed routed experts computed on the host",
            static_cast<double>(g.miss.host_experts));
    counter("strata_expert_miss_copied_total", "missed routed experts run on the GPU from a miss slot",
            static_cast<double>(g.miss.copy_experts));
    counter("strata_expert_miss_uploads_total", "routed experts uploaded into a GPU miss slot",
            static_cast<double>(g.miss.copies));
    counter("strata_expert_miss_slot_hits_total", "missed routed experts found in a GPU miss slot",
            static_cast<double>(g.miss.slot_hits));
    counter("strata_expert_miss_prefetches_total", "miss-slot uploads made ahead by the router look-ahead",
            static_cast<double>(g.miss.prefetches));
    counter("strata_expert_miss_upload_bytes_total", "bytes uploaded into GPU miss slots",
            static_cast<double>(g.miss.copy_bytes));
    counter("strata_expert_miss_upload_seconds_total", "host time queuing the miss slots' uploads",
            g.miss.copy_s);
  }
  return o;
}

}  // namespace strata
