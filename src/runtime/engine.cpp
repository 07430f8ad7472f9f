#include "runtime/engine.h"

#include <algorithm>

#include "base/clock.h"
#include "obs/proc_mem.h"
#include "runtime/stop_strings.h"
#include "runtime/utf8_stream.h"

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

struct Engine::Request {
  uint64_t id = 0;
  CompletionParams p;
  CompletionSink sink;
  double t_submit = 0;
};

struct Engine::Slot {
  std::unique_ptr<Session> session;
  std::unique_ptr<Request> req;  // null: free
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<StopStrings> stops;
  Utf8Stream utf8;
  std::vector<float> logits;
  size_t n_eval = 0;  // prompt tokens evaluated
  int32_t next = 0;   // the sampled token waiting for its forward
  int n_gen = 0;
  double t_admit = 0, t_first = 0, t_last = 0, prompt_s = 0, decode_s = 0;
};

Result<std::unique_ptr<Engine>> Engine::create(const SessionFactory& make_session, const Tokenizer* tok,
                                               int32_t n_vocab, const EngineOptions& opts, ExpertStore* store,
                                               BatchDecode batch_decode) {
  if (opts.n_slots < 1 || opts.n_slots > 256) return err("--parallel %d must be in [1, 256]", opts.n_slots);
  if (opts.max_queue < 0) return err("queue size %d must be >= 0", opts.max_queue);
  if (opts.prefill_chunk < 1) return err("prefill chunk %d must be >= 1", opts.prefill_chunk);
  if (n_vocab <= 0) return err("model has an empty vocabulary");
  std::unique_ptr<Engine> e(new Engine());
  e->tok_ = tok;
  e->n_vocab_ = n_vocab;
  e->opts_ = opts;
  e->store_ = store;
  if (opts.batch_decode && batch_decode) {
    e->batch_decode_ = std::move(batch_decode);
    e->batch_logits_.resize(static_cast<size_t>(opts.n_slots) * static_cast<size_t>(n_vocab));
  }
  for (int i = 0; i < opts.n_slots; ++i) {
    auto s = std::make_unique<Slot>();
    auto sess = make_session();
    if (!sess.ok()) return err_context("slot " + std::to_string(i), sess.error());
    s->session = std::move(*sess);
    s->logits.resize(static_cast<size_t>(n_vocab));
    e->n_ctx_ = s->session->n_ctx();
    e->kv_bytes_ += s->session->memory().kv_cache;
    e->slots_.push_back(std::move(s));
  }
  if (!opts.manual_step) e->thread_ = std::thread([p = e.get()] { p->loop(); });
  return e;
}

Result<std::unique_ptr<Engine>> Engine::for_model(const Model& m, const SessionOptions& so,
                                                  const EngineOptions& opts) {
  if (!m.has_tokenizer()) return err("the model has no tokenizer: the engine needs text in and out");
  BatchDecode batch;
  if (m.can_decode_batch())
    batch = [&m](std::span<Session* const> s, std::span<const int32_t> t, float* l) {
      return m.decode_batch(s, t, l);
    };
  return create([&m, so] { return m.new_session(so); }, &m.tokenizer(), m.n_vocab(), opts, m.expert_store(),
                std::move(batch));
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
}

Result<uint64_t> Engine::submit(CompletionParams p, CompletionSink sink) {
  STRATA_TRY(sampler_params_validate(p.sampling));
  if (p.prompt.empty()) return err("prompt is empty");
  const int n = static_cast<int>(p.prompt.size());
  if (n >= n_ctx_)
    return err("prompt is %d tokens but the context of a slot is %d (need at least one free position)", n,
               n_ctx_);
  for (int i = 0; i < n; ++i) {
    const int32_t t = p.prompt[static_cast<size_t>(i)];
    if (t < 0 || t >= n_vocab_)
      return err("token id %d at prompt position %d is outside the vocabulary (%d)", t, i, n_vocab_);
  }
  auto r = std::make_unique<Request>();
  r->p = std::move(p);
  r->sink = std::move(sink);
  r->t_submit = now_seconds();
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
  for (auto& s : slots_) {
    if (s->req || queue_.empty()) continue;
    s->req = std::move(queue_.front());
    queue_.pop_front();
    s->session->reset();
    s->sampler = std::make_unique<Sampler>(s->req->p.sampling, n_vocab_);
    s->sampler->accept_prompt(s->req->p.prompt);
    s->stops = std::make_unique<StopStrings>(s->req->p.stop);
    s->utf8 = Utf8Stream();
    s->n_eval = 0;
    s->n_gen = 0;
    s->t_admit = now_seconds();
    s->t_first = s->t_last = s->prompt_s = s->decode_s = 0;
    queue_wait_.add(s->t_admit - s->req->t_submit);
  }
  int running = 0;
  for (auto& s : slots_) running += s->req ? 1 : 0;
  counters_.running = running;
  counters_.waiting = static_cast<int>(queue_.size());
}

// One turn: admit, advance every busy slot, evaluate the sampled tokens.
bool Engine::step() {
  admit();
  bool did = false;
  pending_.clear();
  for (auto& s : slots_) {
    if (!s->req) continue;
    if (advance(*s)) pending_.push_back(s.get());
    did = true;
  }
  decode_pending();
  return did;
}

bool Engine::emit(Slot& s, const std::string& text) {
  if (text.empty()) return true;
  CompletionEvent ev;
  ev.text = text;
  return s.req->sink(ev);
}

bool Engine::advance(Slot& s) {
  Request& r = *s.req;
  const std::vector<int32_t>& prompt = r.p.prompt;
  if (s.n_eval < prompt.size()) {  // prefill: the next chunk
    const size_t n = std::min(prompt.size() - s.n_eval, static_cast<size_t>(opts_.prefill_chunk));
    const double t0 = now_seconds();
    Status st =
        s.session->eval(std::span<const int32_t>(prompt.data() + s.n_eval, n), s.logits.data(), false);
    s.prompt_s += now_seconds() - t0;
    if (!st.ok()) return finish(s, FinishReason::error, st.message()), false;
    s.n_eval += n;
    if (s.n_eval < prompt.size()) return false;  // more chunks on later turns
  }
  // Decode: sample from the last logits and release the text; the token is evaluated with the
  // other slots' at the end of the turn (decode_pending).
  const int32_t tok = s.sampler->sample(s.logits.data());
  s.sampler->accept(tok);
  ++s.n_gen;
  const double now = now_seconds();
  if (s.n_gen == 1) {
    s.t_first = now;
    ttft_.add(now - r.t_submit);
  } else {
    tpot_.add(now - s.t_last);
  }
  s.t_last = now;
  if (tok_ && tok_->is_eog(tok) && !r.p.ignore_eos) return finish(s, FinishReason::stop), false;
  std::string out;
  if (tok_) {
    const bool hit = s.stops->push(s.utf8.push(tok_->token_to_piece(tok, false)), &out);
    if (!emit(s, out)) return finish(s, FinishReason::cancelled), false;
    if (hit) return finish(s, FinishReason::stop), false;
  }
  if (r.p.n_predict >= 0 && s.n_gen >= r.p.n_predict) return finish(s, FinishReason::length), false;
  if (s.session->n_past() >= s.session->n_ctx()) return finish(s, FinishReason::length), false;
  s.next = tok;
  return true;
}

// The turn's sampled tokens: one batched forward when the model has one and two or more slots
// are decoding, else one eval per slot.
void Engine::decode_pending() {
  if (pending_.empty()) return;
  const bool batched = batch_decode_ && pending_.size() > 1;
  if (batched) {
    pending_sessions_.clear();
    pending_tokens_.clear();
    for (Slot* s : pending_) {
      pending_sessions_.push_back(s->session.get());
      pending_tokens_.push_back(s->next);
    }
    const double t0 = now_seconds();
    Status st = batch_decode_(pending_sessions_, pending_tokens_, batch_logits_.data());
    const double dt = now_seconds() - t0;
    for (size_t i = 0; i < pending_.size(); ++i) {
      Slot& s = *pending_[i];
      s.decode_s += dt;
      if (!st.ok()) {
        finish(s, FinishReason::error, st.message());
        continue;
      }
      const float* row = batch_logits_.data() + i * static_cast<size_t>(n_vocab_);
      std::copy(row, row + n_vocab_, s.logits.begin());
    }
  } else {
    for (Slot* s : pending_) {
      const double t0 = now_seconds();
      Status st = s->session->eval(std::span<const int32_t>(&s->next, 1), s->logits.data(), false);
      s->decode_s += now_seconds() - t0;
      if (!st.ok()) finish(*s, FinishReason::error, st.message());
    }
  }
  std::lock_guard<std::mutex> lk(mu_);
  counters_.decode_steps += batched ? 1 : pending_.size();
  counters_.decode_rows += pending_.size();
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
  ev.n_prompt = static_cast<int>(r.p.prompt.size());
  ev.n_gen = s.n_gen;
  ev.queue_s = s.t_admit > 0 ? s.t_admit - r.t_submit : 0;
  ev.prompt_s = s.prompt_s;
  ev.decode_s = s.decode_s;
  ev.ttft_s = s.t_first > 0 ? s.t_first - r.t_submit : 0;
  if (reason != FinishReason::cancelled) r.sink(ev);
  e2e_.add(now_seconds() - r.t_submit);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (reason == FinishReason::cancelled)
      ++counters_.requests_cancelled;
    else if (reason == FinishReason::error)
      ++counters_.requests_failed;
    else
      ++counters_.requests_ok;
    counters_.prompt_tokens += s.n_eval;
    counters_.gen_tokens += static_cast<uint64_t>(s.n_gen);
    counters_.running = std::max(0, counters_.running - 1);
    s.req.reset();  // under mu_: submit() counts free slots from other threads
  }
  s.sampler.reset();
  s.stops.reset();
}

EngineCounters Engine::counters() const {
  std::lock_guard<std::mutex> lk(mu_);
  return counters_;
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
  counter("strata_decode_steps_total", "forwards that evaluated sampled tokens (one per turn when batched)",
          static_cast<double>(c.decode_steps));
  counter("strata_decode_rows_total", "sampled tokens evaluated by those forwards",
          static_cast<double>(c.decode_rows));
  gauge("strata_kv_cache_bytes", "KV cache bytes of all slots", static_cast<double>(kv_bytes_));
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
  return o;
}

}  // namespace strata
