#include "runtime/generate.h"

#include "base/clock.h"
#include "runtime/utf8_stream.h"

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

Result<GenerateStats> generate(Session& session, const Tokenizer& tok, int32_t n_vocab,
                               std::string_view prompt, const GenerateOptions& opts,
                               const TextCallback& on_text) {
  STRATA_TRY(sampler_params_validate(opts.sampling));
  if (n_vocab <= 0) return err("model has an empty vocabulary");

  GenerateStats st;
  st.prompt_tokens = tok.encode(prompt, /*add_special=*/true, opts.parse_special);
  if (st.prompt_tokens.empty()) return err("prompt is empty (and the vocabulary adds no BOS token)");
  const int n_ctx = session.n_ctx();
  const int n_prompt = static_cast<int>(st.prompt_tokens.size());
  if (session.n_past() + n_prompt >= n_ctx) {
    return err("prompt is %d tokens but the context is %d (need at least one free position; raise -c)",
               n_prompt, n_ctx - session.n_past());
  }
  for (int i = 0; i < n_prompt; ++i) {
    const int32_t t = st.prompt_tokens[static_cast<size_t>(i)];
    if (t < 0 || t >= n_vocab)
      return err("tokenizer produced id %d at position %d, outside the vocabulary (%d)", t, i, n_vocab);
  }

  Sampler sampler(opts.sampling, n_vocab);
  sampler.accept_prompt(st.prompt_tokens);
  std::vector<float> logits(static_cast<size_t>(n_vocab));

  double t0 = now_seconds();
  STRATA_TRY(session.eval(st.prompt_tokens, logits.data(), /*all_logits=*/false));
  st.prompt_s = now_seconds() - t0;
  st.n_prompt = n_prompt;

  Utf8Stream utf8;
  bool stopped_by_caller = false;
  auto emit = [&](const std::string& text) {
    if (!text.empty() && on_text && !on_text(text)) stopped_by_caller = true;
  };

  st.stop = StopReason::n_predict;
  for (int i = 0; opts.n_predict < 0 || i < opts.n_predict; ++i) {
    t0 = now_seconds();
    const int32_t next = sampler.sample(logits.data());
    sampler.accept(next);
    st.sample_s += now_seconds() - t0;
    st.tokens.push_back(next);
    st.n_gen++;

    if (tok.is_eog(next) && !opts.ignore_eos) {
      st.stop = StopReason::eog;
      break;
    }
    emit(utf8.push(tok.token_to_piece(next, opts.special_pieces)));
    if (stopped_by_caller) {
      st.stop = StopReason::callback;
      break;
    }
    if (opts.n_predict >= 0 && i + 1 >= opts.n_predict) break;  // no need to evaluate the last token
    if (session.n_past() >= n_ctx) {
      st.stop = StopReason::ctx_full;
      break;
    }
    const int32_t one[1] = {next};
    t0 = now_seconds();
    STRATA_TRY(session.eval(one, logits.data(), /*all_logits=*/false));
    st.decode_s += now_seconds() - t0;
    st.n_decode++;
  }
  if (!stopped_by_caller) emit(utf8.flush());
  return st;
}

}  // namespace strata
