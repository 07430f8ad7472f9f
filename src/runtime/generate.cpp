#include "runtime/generate.h"

#include <algorithm>

#include "runtime/engine.h"

namespace strata {

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::n_predict:
      return "n_predict";
    case StopReason::eog:
      return "end of generation";
    case StopReason::ctx_full:
      return "context full";
    case StopReason::callback:
      return "stopped by caller";
  }
  return "?";
}

namespace {

// One request through `engine` (a manual_step one), stepped on this thread. on_event sees every
// event but the final one (false stops the request: `stopped`); the final one is returned unless
// the request failed.
struct OneRequest {
  CompletionEvent last;
  bool stopped = false;
};
using EventFn = std::function<bool(const CompletionEvent&)>;
Result<OneRequest> drive(Engine& engine, CompletionParams p, const EventFn& on_event) {
  if (!engine.manual_step())
    return err("generate: the engine runs its own scheduler thread (manual_step off)");
  p.final_on_cancel = true;
  OneRequest r;
  bool done = false;
  STRATA_TRY(engine.submit(std::move(p), [&](const CompletionEvent& ev) {
    if (ev.done) {
      done = true;
      r.last = ev;
      return true;
    }
    if (on_event(ev)) return true;
    r.stopped = true;
    return false;
  }));
  while (!done && engine.step()) {
  }
  if (!done) return err("the engine ended the request without a final event");
  if (r.last.finish == FinishReason::error) return Error{r.last.error};
  return r;
}

// A one-slot engine over `session` (reset at admission), n_batch prompt tokens per turn.
Result<OneRequest> run_request(const BatchRunner& runner, Session& session, const Tokenizer* tok,
                               int32_t n_vocab, int n_batch, CompletionParams p, const EventFn& on_event) {
  EngineOptions eo;
  eo.max_queue = 0;
  eo.manual_step = true;
  eo.n_batch = n_batch;
  Session* const one[1] = {&session};
  STRATA_ASSIGN(auto engine, Engine::create_borrowed(runner, one, tok, n_vocab, eo));
  p.knobs = session.knobs();  // the caller's (a tool's --profile) stay the session's
  return drive(*engine, std::move(p), on_event);
}

// Generation: on_event sees the text / ids of every event, the final one's included; go runs the
// request.
using RunFn = std::function<Result<OneRequest>(CompletionParams, const EventFn&)>;
Result<GenerateStats> run_one(const Tokenizer* tok, std::vector<int32_t> prompt, const GenerateOptions& opts,
                              const EventFn& on_event, const RunFn& go) {
  GenerateStats st;
  st.prompt_tokens = prompt;
  CompletionParams p;
  p.prompt = std::move(prompt);
  p.n_predict = opts.n_predict;
  p.sampling = opts.sampling;
  p.ignore_eos = opts.ignore_eos;
  p.special = opts.special_pieces;
  p.knobs = opts.knobs;
  p.return_tokens = true;
  auto seen = [&](const CompletionEvent& ev) {
    st.tokens.insert(st.tokens.end(), ev.tokens.begin(), ev.tokens.end());
    return on_event(ev);
  };
  STRATA_ASSIGN(OneRequest r, go(std::move(p), seen));
  const CompletionEvent& last = r.last;
  if (last.finish != FinishReason::cancelled) seen(last);  // the tail of the text, the last ids
  st.n_cached = last.n_cached;
  st.n_prompt = last.n_prompt - last.n_cached;
  st.n_gen = last.n_gen;
  st.n_decode = last.n_decode;
  st.prompt_s = last.prompt_s;
  st.decode_s = last.decode_s;
  st.sample_s = last.sample_s;
  const bool eog = tok && !st.tokens.empty() && tok->is_eog(st.tokens.back()) && !opts.ignore_eos;
  if (r.stopped)
    st.stop = StopReason::callback;
  else if (eog)
    st.stop = StopReason::eog;
  else if (opts.n_predict >= 0 && st.n_gen >= opts.n_predict)
    st.stop = StopReason::n_predict;
  else
    st.stop = StopReason::ctx_full;
  return st;
}

// Session overloads: a prompt alone is one turn (split in the session's steps).
RunFn on_session(const BatchRunner& runner, Session& session, const Tokenizer* tok, int32_t n_vocab) {
  return [&runner, &session, tok, n_vocab](CompletionParams p, const EventFn& ev) {
    return run_request(runner, session, tok, n_vocab, std::max(1, session.n_ctx()), std::move(p), ev);
  };
}

RunFn on_engine(Engine& engine) {
  return [&engine](CompletionParams p, const EventFn& ev) { return drive(engine, std::move(p), ev); };
}

// Text in: the prompt's ids, checked against the vocabulary.
Result<std::vector<int32_t>> encode(const Tokenizer& tok, int32_t n_vocab, std::string_view prompt,
                                    const GenerateOptions& opts) {
  std::vector<int32_t> ids = tok.encode(prompt, /*add_special=*/true, opts.parse_special);
  if (ids.empty()) return err("prompt is empty (and the vocabulary adds no BOS token)");
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= n_vocab)
      return err("tokenizer produced id %d at position %zu, outside the vocabulary (%d)", ids[i], i, n_vocab);
  return ids;
}

EventFn text_events(const TextCallback& on_text) {
  return [&on_text](const CompletionEvent& ev) { return ev.text.empty() || !on_text || on_text(ev.text); };
}

EventFn id_events(const std::function<bool(int32_t)>& on_token) {
  return [&on_token](const CompletionEvent& ev) {
    for (int32_t t : ev.tokens)
      if (on_token && !on_token(t)) return false;
    return true;
  };
}

}  // namespace

Status score(const BatchRunner& runner, Session& session, int32_t n_vocab, std::span<const int32_t> tokens,
             int chunk, const LogitRowsCallback& on_rows) {
  if (chunk < 1) return err("score: chunk %d must be >= 1", chunk);
  CompletionParams p;
  p.prompt.assign(tokens.begin(), tokens.end());
  p.n_predict = 0;
  p.prompt_logits = true;
  // nothing decodes: each turn evaluates `chunk` prompt tokens
  STRATA_ASSIGN(OneRequest r, run_request(runner, session, nullptr, n_vocab, chunk, std::move(p),
                                          [&](const CompletionEvent& ev) {
                                            return ev.logits.empty() || on_rows(ev.logits_pos, ev.logits);
                                          }));
  if (r.stopped) return err("score: stopped by the caller");
  return {};
}

Result<GenerateStats> generate(const BatchRunner& runner, Session& session, const Tokenizer& tok,
                               int32_t n_vocab, std::string_view prompt, const GenerateOptions& opts,
                               const TextCallback& on_text) {
  STRATA_ASSIGN(std::vector<int32_t> ids, encode(tok, n_vocab, prompt, opts));
  GenerateOptions o = opts;
  o.knobs = session.knobs();
  return run_one(&tok, std::move(ids), o, text_events(on_text), on_session(runner, session, &tok, n_vocab));
}

Result<GenerateStats> generate_ids(const BatchRunner& runner, Session& session, int32_t n_vocab,
                                   std::vector<int32_t> prompt, const GenerateOptions& opts,
                                   const std::function<bool(int32_t)>& on_token) {
  GenerateOptions o = opts;
  o.knobs = session.knobs();
  return run_one(nullptr, std::move(prompt), o, id_events(on_token),
                 on_session(runner, session, nullptr, n_vocab));
}

Result<GenerateStats> generate(Engine& engine, const Tokenizer& tok, std::string_view prompt,
                               const GenerateOptions& opts, const TextCallback& on_text) {
  STRATA_ASSIGN(std::vector<int32_t> ids, encode(tok, static_cast<int32_t>(tok.n_vocab()), prompt, opts));
  return run_one(&tok, std::move(ids), opts, text_events(on_text), on_engine(engine));
}

Result<GenerateStats> generate_ids(Engine& engine, std::vector<int32_t> prompt, const GenerateOptions& opts,
                                   const std::function<bool(int32_t)>& on_token) {
  return run_one(nullptr, std::move(prompt), opts, id_events(on_token), on_engine(engine));
}

}  // namespace strata
