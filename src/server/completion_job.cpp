#include "server/completion_job.h"

#include <algorithm>
#include <atomic>
#include <ctime>
#include <random>

#include "text/chat_template_jinja.h"

namespace strata::server {

using nlohmann::json;

namespace {

// A completion's answer, built on the I/O thread from its choices' events.
struct Answer {
  Answer(ApiResponseHead head, const ApiRequest& r, const Tokenizer& tok)
      : out(std::move(head), r, tok), stream(r.stream) {}
  ResponseBuilder out;
  bool stream = false;
  bool begun = false;               // stream: the 200 and its headers are on their way
  std::atomic<bool> failed{false};  // a submit failed: the choices already queued are dropped
  int n_choices = 1;
  bool n_per_prompt = false;  // n > 1: refusals name the choice, else the prompt
  // n > 1, by a prompt's first choice: the prompt's other choices (index, params), submitted at its
  // first event (I/O thread).
  std::vector<std::vector<std::pair<int, CompletionParams>>> later;
};

const std::string& shutdown_event() {
  static const std::string s =
      "data: " + json_text(error_body("server shutting down", 503)) + "\n\ndata: [DONE]\n\n";
  return s;
}

void begin(Exchange& ex, Answer& a) {
  if (a.begun) return;
  a.begun = true;
  ex.begin_stream("text/event-stream", shutdown_event());
}

// One engine event of choice `choice` (I/O thread): SSE chunks, or the whole answer at the end.
void deliver(Exchange& ex, Answer& a, int choice, const CompletionEvent& ev) {
  if (a.failed) return;
  if (!a.stream) {
    if (ev.done && ev.finish == FinishReason::error) return ex.respond(error_response(500, ev.error));
    a.out.add(choice, ev);
    if (a.out.done()) ex.respond(json_response(200, a.out.body()));
    return;
  }
  begin(ex, a);
  std::string s = a.out.sse(choice, ev);
  if (!s.empty()) ex.write(std::move(s));
  if (a.out.done()) ex.end_stream();  // after an error too: the other choices are cancelled
}

HttpResponse refusal(const std::string& message) {
  const bool busy = message.rfind("server busy", 0) == 0 || message == "server shutting down";
  HttpResponse res = error_response(busy ? 503 : 400, message);
  if (busy) res.headers.emplace_back("Retry-After", "1");
  return res;
}

// The server's own limits on a request, before any tokenizing: nullopt when it is within them.
std::optional<std::string> over_limits(const ApiContext& ctx, const ApiRequest& r) {
  const std::vector<std::string>& stop = r.params.stop;
  if (static_cast<int>(stop.size()) > ctx.max_stop)
    return "'stop' has " + std::to_string(stop.size()) + " strings; this server takes at most " +
           std::to_string(ctx.max_stop) + " (--max-stop)";
  for (size_t i = 0; i < stop.size(); ++i)
    if (stop[i].size() > ctx.max_stop_bytes)
      return "'stop'[" + std::to_string(i) + "] is " + std::to_string(stop[i].size()) + " bytes; at most " +
             std::to_string(ctx.max_stop_bytes) + " are allowed";
  // Tokenizing costs time in proportion to the bytes: a prompt that cannot fit is refused first.
  const size_t cap = static_cast<size_t>(ctx.engine.n_ctx()) * ctx.max_token_bytes;
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    const ApiPrompt& p = r.prompts[i];
    if (!p.tokens.empty() || p.text.size() <= cap) continue;
    const std::string which = r.prompts.size() > 1 ? "prompt " + std::to_string(i) + ": " : "";
    return which + "prompt is " + std::to_string(p.text.size()) + " bytes but the context of a slot is " +
           std::to_string(ctx.engine.n_ctx()) + " tokens, which hold at most " + std::to_string(cap) +
           " bytes (" + std::to_string(ctx.max_token_bytes) + " per token at most)";
  }
  return std::nullopt;
}

// max_tokens 0 without prompt logprobs: each choice is its prompt (echoed or not), no engine work.
// The prompt is checked as the engine would check it.
std::optional<std::string> answer_without_engine(const ApiContext& ctx, const ApiRequest& r,
                                                 const std::shared_ptr<Exchange>& ex,
                                                 const std::shared_ptr<Answer>& a) {
  std::vector<CompletionEvent> last(r.prompts.size());
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    const std::string which = r.prompts.size() > 1 ? "prompt " + std::to_string(i) + ": " : "";
    const std::vector<int32_t>& toks = r.prompts[i].tokens;
    const int n = static_cast<int>(toks.size());
    if (n > ctx.engine.n_ctx())
      return which + "prompt is " + std::to_string(n) + " tokens but the context of a slot is " +
             std::to_string(ctx.engine.n_ctx());
    for (int32_t t : toks)
      if (t < 0 || t >= ctx.tok.n_vocab())
        return which + "token id " + std::to_string(t) + " is outside the vocabulary (" +
               std::to_string(ctx.tok.n_vocab()) + ")";
    last[i].done = true;
    last[i].finish = FinishReason::length;
    last[i].n_prompt = n;
  }
  ex->post([ex, a, last = std::move(last)] {
    for (size_t i = 0; i < last.size(); ++i) deliver(*ex, *a, static_cast<int>(i), last[i]);
  });
  return std::nullopt;
}

// With tools, the grammar of the model's calls (in the chat format's syntax): lazy (from the call's
// opening on) for tool_choice auto, the whole reply for required or a named function.
Status use_tools(const ApiContext& ctx, ApiRequest* r) {
  if (!ctx.chat) return {};  // render_chat says so (with --jinja: calls are not parsed)
  if (!r->tools_auto) return {};
  r->tool_syntax = tool_syntax_for(*ctx.chat);
  // Markers the vocabulary has as control tokens: shown to the parser (an end of generation never
  // is), named by id in the grammar.
  ToolMarkerTokens marks = tool_marker_tokens(r->tool_syntax, ctx.tok);
  for (const auto& [text, id] : marks) {
    if (ctx.tok.is_eog(id)) continue;
    r->params.shown_tokens.push_back(id);
    r->tool_hidden.push_back(text);
  }
  const ToolGrammarOptions o{.parallel = r->parallel_tool_calls,
                             .required = r->tool_required,
                             .thinking = r->thinking,
                             .tokens = std::move(marks)};
  auto gbnf = tool_calls_grammar(r->tool_syntax, r->tool_fns, o);
  if (!gbnf.ok()) return err("'tools': %s", gbnf.message().c_str());
  auto g = Grammar::parse(*gbnf);
  if (!g.ok()) return err("'tools': %s", g.message().c_str());
  r->params.grammar = std::make_shared<const Grammar>(std::move(*g));
  if (!r->tool_required) r->params.grammar_trigger = tool_call_trigger(r->tool_syntax);
  return {};
}

// n > 1: every prompt n times (choice i * n + j); choice j's seed is seed + j (vLLM's rule), from one
// random base when the request has none, so the choices differ. The seeds, one per choice.
std::vector<uint32_t> choice_seeds(ApiRequest& r) {
  std::vector<uint32_t> seeds;
  if (r.n == 1) {
    seeds.assign(r.prompts.size(), r.params.sampling.seed);
    return seeds;
  }
  uint64_t base = r.params.sampling.seed;
  if (!r.seeded) base = std::random_device{}();
  std::vector<ApiPrompt> prompts;
  for (const ApiPrompt& p : r.prompts) {
    for (int j = 0; j < r.n; ++j) {
      prompts.push_back(p);
      // kSamplerRandomSeed (2^32 - 1) means "random": the sum wraps below it.
      seeds.push_back(static_cast<uint32_t>((base + static_cast<uint64_t>(j)) % kSamplerRandomSeed));
    }
  }
  r.prompts = std::move(prompts);
  return seeds;
}

bool submit_choice(Engine& engine, const std::shared_ptr<Exchange>& ex, const std::shared_ptr<Answer>& a,
                   int choice, CompletionParams p);

// The first event of a prompt's first choice (I/O thread): its other choices go now.
void submit_later(Engine& engine, const std::shared_ptr<Exchange>& ex, const std::shared_ptr<Answer>& a,
                  int choice) {
  if (static_cast<size_t>(choice) >= a->later.size() || a->later[static_cast<size_t>(choice)].empty()) return;
  auto later = std::move(a->later[static_cast<size_t>(choice)]);
  a->later[static_cast<size_t>(choice)].clear();
  for (auto& [index, params] : later)
    if (a->failed || !submit_choice(engine, ex, a, index, std::move(params))) return;
}

// Submits one choice whose events are delivered on the I/O thread. False when the engine refused
// it: the request is answered with the refusal (after any event of an earlier choice: a stream
// already begun ends with it) and the choices already queued are cancelled at their next event.
bool submit_choice(Engine& engine, const std::shared_ptr<Exchange>& ex, const std::shared_ptr<Answer>& a,
                   int choice, CompletionParams p) {
  Engine* e = &engine;
  CompletionSink sink = [ex, a, choice, e](const CompletionEvent& ev) {
    if (a->failed) return false;
    CompletionEvent c = ev;
    c.logits = {};  // valid during the call only (and not asked for)
    return ex->post([ex, a, choice, e, c = std::move(c)] {
      submit_later(*e, ex, a, choice);
      deliver(*ex, *a, choice, c);
    });
  };
  auto sub = engine.submit(std::move(p), std::move(sink));
  if (sub.ok()) return true;
  a->failed = true;
  HttpResponse res = refusal(sub.message());
  if (a->n_choices > 1)
    res.body = error_response(res.status, (a->n_per_prompt ? "choice " : "prompt ") + std::to_string(choice) +
                                              ": " + sub.message())
                   .body;
  ex->post([ex, a, res = std::move(res)]() mutable {
    if (!a->begun) return ex->respond(std::move(res));
    ex->write("data: " + res.body + "\n\ndata: [DONE]\n\n");
    ex->end_stream();
  });
  return false;
}

}  // namespace

Result<std::string> render_chat(const std::optional<ChatFormat>& format, std::vector<ChatMessage> messages,
                                const ChatOptions& opts, const ChatInserts& inserts) {
  if (!format)
    return err(
        "this model has no chat template strata knows; use /v1/completions or start the server with "
        "--chat-template NAME");
  const std::vector<std::string_view> roles = chat_format_roles(*format);
  const bool has_developer = std::find(roles.begin(), roles.end(), "developer") != roles.end();
  for (ChatMessage& m : messages)
    if (m.role == "developer" && !has_developer) m.role = "system";
  return chat_apply_inserts(*format, messages, inserts, opts);
}

Result<std::string> render_chat_request(const ApiContext& ctx, ApiRequest& r, const std::string& body,
                                        bool add_generation_prompt) {
  if (ctx.jinja) return ctx.jinja->render(body, add_generation_prompt);
  // Tools and the history's calls and results written into the messages (and between turns) in
  // the model's syntax.
  ChatInserts inserts;
  if (ctx.chat && !r.tools.empty()) STRATA_TRY(apply_chat_tools(*ctx.chat, r.tools, &r.messages, &inserts));
  return render_chat(ctx.chat, std::move(r.messages),
                     ChatOptions{.add_assistant_prompt = add_generation_prompt,
                                 .thinking = r.thinking,
                                 .reasoning_max = r.reasoning_max,
                                 .has_tools = !r.tools.tools.empty()},
                     inserts);
}

void CompletionJob::start(const ApiContext& ctx, uint64_t id, const std::shared_ptr<Exchange>& ex, bool chat,
                          bool infill) {
  const HttpRequest& req = ex->request();
  auto parsed = infill ? parse_infill_request(req.body) : parse_request(req.body, chat);
  if (!parsed.ok()) return ex->respond(error_response(400, parsed.message()));
  ApiRequest& r = *parsed;
  if (chat) {
    if (auto bad = use_tools(ctx, &r); !bad.ok()) return ex->respond(error_response(400, bad.message()));
    auto text = render_chat_request(ctx, r, req.body);
    if (!text.ok()) return ex->respond(error_response(400, text.message()));
    // A template that writes bos_token itself: the tokenizer adds the BOS (once).
    if (ctx.jinja && ctx.tok.add_bos() && !ctx.jinja->bos_token().empty() &&
        text->starts_with(ctx.jinja->bos_token()))
      text->erase(0, ctx.jinja->bos_token().size());
    r.prompts = {ApiPrompt{std::move(*text), {}}};
  }
  if (auto bad = over_limits(ctx, r)) return ex->respond(error_response(400, *bad));
  if (r.fim) {  // each prompt is the code before the hole; room is left for the reply
    const int64_t n_ctx = ctx.engine.n_ctx();
    const int64_t reserve =
        r.params.n_predict >= 0 ? std::min<int64_t>(r.params.n_predict, n_ctx / 2) : n_ctx / 4;
    for (ApiPrompt& p : r.prompts) {
      r.fim->prefix = p.tokens.empty() ? ctx.tok.encode(p.text, false, false) : p.tokens;
      auto toks = fim_prompt(ctx.tok, *r.fim, n_ctx - reserve);
      if (!toks.ok()) return ex->respond(error_response(400, toks.message()));
      p.tokens = std::move(*toks);
    }
  }
  for (ApiPrompt& p : r.prompts)
    if (p.tokens.empty()) p.tokens = ctx.tok.encode(p.text, /*add_special=*/true, /*parse_special=*/true);
  std::vector<uint32_t> seeds = choice_seeds(r);
  r.params.t_arrival = req.t_arrival;
  r.params.knobs = profile_knobs(r.profile.value_or(ctx.profile));
  ApiResponseHead head;
  head.chat = chat;
  head.native = r.native;
  head.id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(id);
  head.model = ctx.model_name;
  head.created = static_cast<int64_t>(std::time(nullptr));
  auto a = std::make_shared<Answer>(std::move(head), r, ctx.tok);
  a->n_choices = static_cast<int>(r.prompts.size());
  a->n_per_prompt = r.n > 1;

  if (r.params.n_predict == 0 && r.params.prompt_logprobs < 0) {
    if (auto bad = answer_without_engine(ctx, r, ex, a)) return ex->respond(error_response(400, *bad));
    return;
  }
  // n > 1: a prompt's first choice goes now, its others when its first event shows the prompt
  // evaluated, so that they take its KV blocks from the prefix cache instead of prefilling again.
  // (`later` is complete before the first submit: the I/O thread reads it from the first event on.)
  a->later.resize(r.prompts.size());
  std::vector<std::pair<int, CompletionParams>> now;
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    CompletionParams p = r.params;
    p.prompt = r.prompts[i].tokens;
    p.sampling.seed = seeds[i];
    const size_t first = i - i % static_cast<size_t>(r.n);
    (i == first ? now : a->later[first]).emplace_back(static_cast<int>(i), std::move(p));
  }
  for (auto& [choice, p] : now)
    if (!submit_choice(ctx.engine, ex, a, choice, std::move(p))) return;
  if (a->stream) ex->post([ex, a] { begin(*ex, *a); });  // the headers go now, before the first token
}

}  // namespace strata::server
