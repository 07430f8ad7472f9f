// Tool calls in the models' own syntax (server/tool_calls.h): the prompt as Qwen3's and DeepSeek-V4's
// templates write tools, calls and results; replies parsed per format; a reply fed in pieces of every
// size parses as the whole does; the lazy grammar's sentences; a scripted reply streamed through
// the response builder reassembles to the non-streamed answer; and markers that are one control token
// (a scripted model's token ids through the engine): parsed, forced by required, never content.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include "runtime/engine.h"
#include "runtime/fake_session.h"
#include "runtime/grammar_constraint.h"
#include "runtime/grammar_matcher.h"
#include "server/response_builder.h"
#include "server/tool_calls.h"

namespace strata::server {
namespace {

using nlohmann::json;

const char* kTools =
    R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}])";

// system, user, an assistant call, two tool results.
ApiRequest conversation(bool with_tools) {
  nlohmann::ordered_json body{
      {"messages", nlohmann::ordered_json::parse(
                       R"([{"role": "system", "content": "S"}, {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"days\": 2}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "12C"}, {"role": "tool", "content": "sunny"}])")}};
  if (with_tools) body["tools"] = nlohmann::ordered_json::parse(kTools);
  auto r = parse_request(body.dump(), /*chat=*/true);
  EXPECT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->tools_auto, with_tools);
  return r.ok() ? std::move(*r) : ApiRequest{};
}

std::string render(ChatFormat f, ApiRequest r) {
  ChatInserts inserts;
  Status s = apply_chat_tools(f, r.tools, &r.messages, &inserts);
  EXPECT_TRUE(s.ok()) << s.message();
  auto text = chat_apply_inserts(f, r.messages, inserts, ChatOptions{.has_tools = !r.tools.tools.empty()});
  EXPECT_TRUE(text.ok()) << text.message();
  return text.ok() ? *text : "";
}

TEST(ToolPrompt, ChatmlIsQwen3sTemplate) {
  EXPECT_EQ(
      render(ChatFormat::chatml, conversation(true)),
      "<|im_start|>system\nS\n\n# Tools\n\nYou may call one or more functions to assist with the user "
      "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
      R"({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", )"
      R"("properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}})"
      "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
      "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
      "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nweather?<|im_end|>\n"
      "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Oslo\", \"days\": 2}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n12C\n"
      "</tool_response>\n<tool_response>\nsunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
  // Without tools (tool_choice none, or a history only) the calls and results are still written.
  const std::string no_tools = render(ChatFormat::chatml, conversation(false));
  EXPECT_EQ(no_tools.find("# Tools"), std::string::npos);
  EXPECT_NE(no_tools.find("<tool_response>\n12C"), std::string::npos);
}

TEST(ToolPrompt, Deepseek4IsItsTemplatesDsml) {
  const std::string s = render(ChatFormat::deepseek4, conversation(true));
  EXPECT_EQ(s.rfind("S\n\n## Tools\n\nYou have access to a set of tools", 0), 0u) << s;
  EXPECT_NE(s.find("### Available Tool Schemas\n\n{\"name\": \"get_weather\", \"parameters\": {\"type\": "
                   "\"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": "
                   "\"integer\"}}, \"required\": [\"city\"]}}\n\nYou MUST strictly follow"),
            std::string::npos)
      << s;
  const std::string tail =
      "to invoke tool calls.\n<｜User｜>weather?<｜Assistant｜></think>\n\n<｜DSML｜tool_calls>\n"
      "<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Oslo</｜DSML｜"
      "parameter>\n<｜DSML｜parameter name=\"days\" "
      "string=\"false\">2</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
      "</｜DSML｜tool_calls><｜end▁of▁sentence｜><｜User｜><tool_result>12C</tool_result>\n\n<tool_result>"
      "sunny</tool_result><｜Assistant｜></think>";
  ASSERT_GE(s.size(), tail.size());
  EXPECT_EQ(s.substr(s.size() - tail.size()), tail);
}

// With tools or tool results and thinking on, every assistant turn keeps its reasoning (the
// template's has_tools / ns.has_tool_calls); without either only those after the last user turn do.
TEST(ToolPrompt, Deepseek4KeepsReasoningWithTools) {
  ApiRequest r = conversation(true);
  r.messages[2].reasoning_content = "look it up";
  r.messages[3] = ChatMessage{"user", "12C"};  // results as user text: no tool message
  r.messages[4] = ChatMessage{"user", "sunny"};
  for (bool tools : {false, true}) {
    std::vector<ChatMessage> m = r.messages;
    ChatTools t = r.tools;
    if (!tools) t.tools = nlohmann::ordered_json::array();
    ChatInserts inserts;
    ASSERT_TRUE(apply_chat_tools(ChatFormat::deepseek4, t, &m, &inserts).ok());
    EXPECT_TRUE(inserts.empty());
    auto text = chat_apply(ChatFormat::deepseek4, m, ChatOptions{.thinking = true, .has_tools = tools});
    ASSERT_TRUE(text.ok()) << text.message();
    EXPECT_EQ(
        text->find("<｜Assistant｜><think>look it up</think>\n\n<｜DSML｜tool_calls>") != std::string::npos,
        tools)
        << *text;
  }
}

TEST(ToolPrompt, Deepseek4KeepsReasoningWithToolResults) {
  ApiRequest r = conversation(false);  // no tools, but tool messages in the history
  r.messages[2].reasoning_content = "look it up";
  r.messages.push_back(ChatMessage{"user", "and tomorrow?"});
  ChatInserts inserts;
  ASSERT_TRUE(apply_chat_tools(ChatFormat::deepseek4, r.tools, &r.messages, &inserts).ok());
  auto text = chat_apply(ChatFormat::deepseek4, r.messages, ChatOptions{.thinking = true});
  ASSERT_TRUE(text.ok()) << text.message();
  EXPECT_NE(text->find("<｜Assistant｜><think>look it up</think>\n\n<｜DSML｜tool_calls>"), std::string::npos)
      << *text;
}

// A call without arguments: the template writes an empty line in its invoke block.
TEST(ToolPrompt, Deepseek4CallWithoutArguments) {
  auto r = parse_request(
      R"({"messages": [{"role": "user", "content": "t?"}, {"role": "assistant", "tool_calls": [{"type": "function",
        "function": {"name": "now", "arguments": "{}"}}]}]})",
      true);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(render(ChatFormat::deepseek4, std::move(*r)),
            "<｜User｜>t?<｜Assistant｜></think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"now\">\n\n"
            "</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜><｜Assistant｜></think>");
}

TEST(ToolPrompt, BadHistoryCallsAre400s) {
  auto bad = [](const char* messages) {
    auto r = parse_request(std::string(R"({"messages": )") + messages + "}", true);
    return r.ok() ? std::string() : r.message();
  };
  EXPECT_NE(bad(R"([{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}])")
                .find("messages[0].tool_calls[0] must be"),
            std::string::npos);
  EXPECT_NE(bad(R"([{"role": "user", "tool_calls": [{"function": {"name": "f"}}]}])")
                .find("messages[0].tool_calls: only assistant"),
            std::string::npos);
  auto r = parse_request(
      R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{x"}}]}]})",
      true);
  ASSERT_TRUE(r.ok()) << r.message();
  ChatInserts inserts;
  Status s = apply_chat_tools(ChatFormat::chatml, r->tools, &r->messages, &inserts);
  EXPECT_NE(s.message().find("arguments {x are not JSON"), std::string::npos) << s.message();
}

TEST(ToolCallParser, HermesCallsAndContent) {
  ToolCallDelta d =
      parse_tool_calls(ToolSyntax::hermes,
                       "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                       "{\"city\": \"Oslo\", \"days\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": "
                       "\"now\", \"arguments\": {}}\n</tool_call>\n");
  EXPECT_EQ(d.content, "Let me look.");
  ASSERT_EQ(d.calls.size(), 2u);
  EXPECT_EQ(d.calls[0].name, "get_weather");
  EXPECT_EQ(d.calls[0].arguments, R"({"city":"Oslo","days":2})");  // compact, the model's key order
  EXPECT_EQ(d.calls[1].name, "now");
  EXPECT_EQ(d.calls[1].arguments, "{}");
  // Plain answers come back exactly; a malformed call is content, never an error.
  EXPECT_EQ(parse_tool_calls(ToolSyntax::hermes, " Hi <tool  \n").content, " Hi <tool  \n");
  d = parse_tool_calls(ToolSyntax::hermes, "x <tool_call>{\"name\": 3}</tool_call> y");
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.content, "x <tool_call>{\"name\": 3}</tool_call> y");
  // An unclosed call that parses is a call (the reply ended at it).
  d = parse_tool_calls(ToolSyntax::hermes, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1]}}");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, R"({"a":[1]})");
  EXPECT_EQ(d.content, "");
}

TEST(ToolCallParser, DsmlInvokesAndParameters) {
  ToolCallDelta d =
      parse_tool_calls(ToolSyntax::dsml,
                       "Checking.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
                       "<｜DSML｜parameter name=\"location\" string=\"true\">Hangzhou</｜DSML｜"
                       "parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜"
                       "parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"now\">\n</｜DSML｜"
                       "invoke>\n</｜DSML｜tool_calls>");
  EXPECT_EQ(d.content, "Checking.");
  ASSERT_EQ(d.calls.size(), 2u);
  EXPECT_EQ(d.calls[0].name, "get_weather");
  EXPECT_EQ(d.calls[0].arguments, R"({"location":"Hangzhou","days":3})");
  EXPECT_EQ(d.calls[1].name, "now");
  EXPECT_EQ(d.calls[1].arguments, "{}");
  const std::string bad =
      "<｜DSML｜tool_calls><｜DSML｜invoke name=\"f\"><｜DSML｜parameter name=\"a\" "
      "string=\"false\">not json</｜DSML｜parameter></｜DSML｜invoke></｜DSML｜tool_calls>";
  d = parse_tool_calls(ToolSyntax::dsml, bad);
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.content, bad);
}

// Fed in pieces of every size from 1 to 9 bytes, a reply gives the content and calls of the whole.
TEST(ToolCallParser, PiecesReassembleToTheWhole) {
  const std::vector<std::pair<ToolSyntax, std::string>> replies = {
      {ToolSyntax::hermes,
       "A <b> c\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": \"</tool\"}}\n"
       "</tool_call>\n<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>"},
      {ToolSyntax::hermes, "no call at all <tool_cal  "},
      {ToolSyntax::hermes, "<tool_call>broken</tool_call> then text <tool_call>{\"name\": \"h\"}"},
      {ToolSyntax::dsml,
       "Ok.\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"q\" "
       "string=\"true\">a b</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"},
  };
  for (const auto& [syntax, text] : replies) {
    const ToolCallDelta whole = parse_tool_calls(syntax, text);
    for (size_t step = 1; step <= 9; ++step) {
      ToolCallParser p(syntax);
      std::string content;
      std::vector<ToolCall> calls;
      auto take = [&](ToolCallDelta d) {
        content += d.content;
        for (ToolCall& c : d.calls) calls.push_back(std::move(c));
      };
      for (size_t at = 0; at < text.size(); at += step) take(p.feed(std::string_view(text).substr(at, step)));
      take(p.finish());
      EXPECT_EQ(content, whole.content) << text << " step " << step;
      ASSERT_EQ(calls.size(), whole.calls.size()) << text << " step " << step;
      for (size_t k = 0; k < calls.size(); ++k) {
        EXPECT_EQ(calls[k].name, whole.calls[k].name);
        EXPECT_EQ(calls[k].arguments, whole.calls[k].arguments);
      }
    }
  }
}

TEST(ToolCallGrammar, LazyGrammarIsTheHermesCallsOfTheTools) {
  ToolFunction f{"get_weather", json::parse(kTools)[0]["function"]["parameters"]};
  for (bool parallel : {false, true}) {
    auto gbnf = tool_calls_grammar(ToolSyntax::hermes, {f}, ToolGrammarOptions{.parallel = parallel});
    ASSERT_TRUE(gbnf.ok()) << gbnf.message();
    auto g = Grammar::parse(*gbnf);
    ASSERT_TRUE(g.ok()) << g.message();
    const std::string one =
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
    EXPECT_TRUE(grammar_matches(*g, one));
    EXPECT_EQ(grammar_matches(*g, one + "\n" + one), parallel);
    EXPECT_FALSE(grammar_matches(*g, "<tool_call>{\"name\": \"other\", \"arguments\": {}}</tool_call>"));
    EXPECT_FALSE(
        grammar_matches(*g, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>"));
  }
  EXPECT_FALSE(tool_calls_grammar(ToolSyntax::dsml, {}, {}).ok());
}

// DSML: an invoke whose parameters may all be left out may hold the empty line the template writes
// for a call without arguments; one with a required parameter may not be empty.
TEST(ToolCallGrammar, DsmlInvokeWithoutArguments) {
  ToolFunction now{"now", json::parse(R"({"type": "object", "properties": {"tz": {"type": "string"}}})")};
  ToolFunction w{"get_weather", json::parse(kTools)[0]["function"]["parameters"]};
  auto gbnf = tool_calls_grammar(ToolSyntax::dsml, {now, w}, ToolGrammarOptions{.required = true});
  ASSERT_TRUE(gbnf.ok()) << gbnf.message();
  auto g = Grammar::parse(*gbnf);
  ASSERT_TRUE(g.ok()) << g.message();
  const std::string open = "\n\n<｜DSML｜tool_calls>\n", close = "</｜DSML｜tool_calls>";
  for (const char* body : {"\n", "\n\n"})
    EXPECT_TRUE(
        grammar_matches(*g, open + "<｜DSML｜invoke name=\"now\">" + body + "</｜DSML｜invoke>\n" + close))
        << *gbnf;
  EXPECT_FALSE(
      grammar_matches(*g, open + "<｜DSML｜invoke name=\"get_weather\">\n\n</｜DSML｜invoke>\n" + close));
}

// DSML string parameters are raw text under their schema: maxLength / minLength bound it, an enum
// lists its texts, and a pattern makes the value a JSON string (string="false") the pattern holds.
TEST(ToolCallGrammar, DsmlRawStringsKeepTheirSchema) {
  ToolFunction f{"f", json::parse(R"({"type": "object", "properties": {
      "city": {"type": "string", "minLength": 2, "maxLength": 5},
      "zone": {"type": "string", "enum": ["UTC", "CET"]},
      "code": {"type": "string", "pattern": "^[A-Z]{2}$"}}, "required": ["city", "zone", "code"]})")};
  auto gbnf = tool_calls_grammar(ToolSyntax::dsml, {f}, ToolGrammarOptions{.required = true});
  ASSERT_TRUE(gbnf.ok()) << gbnf.message();
  auto g = Grammar::parse(*gbnf);
  ASSERT_TRUE(g.ok()) << g.message();
  // the parameters in the schema's key order (city, code, zone)
  auto call = [](const std::string& city, const std::string& zone, const std::string& code) {
    const std::string p = "<｜DSML｜parameter name=\"", e = "</｜DSML｜parameter>\n";
    return "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n" + p + "city\" string=\"true\">" + city +
           e + p + "code\" " + code + e + p + "zone\" string=\"true\">" + zone + e +
           "</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  };
  EXPECT_TRUE(grammar_matches(*g, call("Oslo", "CET", "string=\"false\">\"NO\""))) << *gbnf;
  EXPECT_FALSE(grammar_matches(*g, call("Oslo is cold", "CET", "string=\"false\">\"NO\"")));  // maxLength
  EXPECT_FALSE(grammar_matches(*g, call("O", "CET", "string=\"false\">\"NO\"")));             // minLength
  EXPECT_FALSE(grammar_matches(*g, call("Oslo", "PST", "string=\"false\">\"NO\"")));          // enum
  EXPECT_FALSE(grammar_matches(*g, call("Oslo", "CET", "string=\"false\">\"Nor\"")));         // pattern
  EXPECT_FALSE(grammar_matches(*g, call("Oslo", "CET", "string=\"true\">NO")));  // raw: no pattern
  const ToolCallDelta d = parse_tool_calls(ToolSyntax::dsml, call("Oslo", "CET", "string=\"false\">\"NO\""));
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(json::parse(d.calls[0].arguments),
            json::parse(R"({"city": "Oslo", "zone": "CET", "code": "NO"})"));
}

// The data chunks of an SSE body, each parsed.
std::vector<json> sse_chunks(const std::string& body) {
  std::vector<json> out;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    const std::string payload = body.substr(at + 6, end - at - 6);
    at = end;
    if (payload != "[DONE]") out.push_back(json::parse(payload));
  }
  return out;
}

// A scripted reply with prose and two calls, in events of a few bytes: the streamed chunks rebuild
// the non-streamed message (content, tool_calls with ids, names, arguments; finish_reason).
TEST(ToolCallResponse, StreamedChunksReassembleToTheAnswer) {
  const std::string reply =
      "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\", \"days\": "
      "2}}\n</tool_call>";
  testing_fakes::ByteTokenizer tok;
  json expected;
  for (bool stream : {false, true}) {
    json body{{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
              {"tools", json::parse(kTools)},
              {"stream", stream}};
    auto r = parse_request(body.dump(), true);
    ASSERT_TRUE(r.ok()) << r.message();
    r->prompts = {ApiPrompt{"x", {1}}};
    ResponseBuilder b(ApiResponseHead{"chatcmpl-3", "m", 0, true}, *r, tok);
    std::string sse;
    for (size_t at = 0; at < reply.size(); at += 5) {
      CompletionEvent ev;
      ev.text = reply.substr(at, 5);
      ev.done = at + 5 >= reply.size();
      if (stream) {
        sse += b.sse(0, ev);
      } else {
        b.add(0, ev);
      }
    }
    ASSERT_TRUE(b.done());
    if (!stream) {
      expected = b.body()["choices"][0];
      continue;
    }
    std::string content, finish;
    json calls = json::array();
    for (const json& ch : sse_chunks(sse)) {
      const json& c = ch["choices"][0];
      if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
      if (c["delta"].contains("content")) content += c["delta"]["content"].get<std::string>();
      for (const json& t : c["delta"].value("tool_calls", json::array())) {
        const size_t k = t["index"];
        if (k == calls.size())
          calls.push_back({{"id", t["id"]},
                           {"type", t["type"]},
                           {"function", {{"name", t["function"]["name"]}, {"arguments", ""}}}});
        calls[k]["function"]["arguments"] = calls[k]["function"]["arguments"].get<std::string>() +
                                            t["function"]["arguments"].get<std::string>();
      }
    }
    EXPECT_EQ(finish, "tool_calls");
    EXPECT_EQ(expected["finish_reason"], "tool_calls");
    EXPECT_EQ(content, expected["message"]["content"]);
    EXPECT_EQ(calls, expected["message"]["tool_calls"]) << sse;
  }
  ASSERT_EQ(expected["message"]["tool_calls"].size(), 2u);
  EXPECT_EQ(expected["message"]["content"], "Sure.");
  EXPECT_EQ(expected["message"]["tool_calls"][1]["id"], "call_chatcmpl-3-0-1");
  EXPECT_EQ(expected["message"]["tool_calls"][1]["function"]["arguments"], R"({"city":"Rome","days":2})");
}

// tool_choice required: the reply (only calls, under the grammar) is parsed as with auto, streamed
// as each call closes; a reply cut short stays content.
TEST(ToolCallResponse, RequiredRepliesAreParsedCalls) {
  const std::string reply =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
  testing_fakes::ByteTokenizer tok;
  json want;
  for (bool stream : {false, true}) {
    json body{{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
              {"tools", json::parse(kTools)},
              {"tool_choice", "required"},
              {"stream", stream}};
    auto r = parse_request(body.dump(), true);
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_TRUE(r->tools_auto && r->tool_required);
    r->prompts = {ApiPrompt{"x", {1}}, ApiPrompt{"y", {1}}};
    ResponseBuilder b(ApiResponseHead{"chatcmpl-4", "m", 0, true}, *r, tok);
    CompletionEvent ev;
    ev.text = reply.substr(0, 20);
    std::string sse = stream ? b.sse(0, ev) : (b.add(0, ev), "");
    EXPECT_EQ(sse, "");  // nothing shown before the call closes
    ev.text = reply.substr(20);
    ev.done = true;
    CompletionEvent cut;
    cut.text = reply.substr(0, 30);
    cut.done = true;
    cut.finish = FinishReason::length;
    if (!stream) {
      b.add(0, ev);
      b.add(1, cut);
      const json out = b.body();
      want = out["choices"][0]["message"]["tool_calls"];
      EXPECT_EQ(out["choices"][0]["finish_reason"], "tool_calls");
      EXPECT_TRUE(out["choices"][0]["message"]["content"].is_null());
      EXPECT_EQ(out["choices"][1]["finish_reason"], "length");
      EXPECT_EQ(out["choices"][1]["message"]["content"], reply.substr(0, 30));
      continue;
    }
    sse = b.sse(0, ev);
    const std::vector<json> chunks = sse_chunks(sse);
    ASSERT_EQ(chunks.size(), 3u) << sse;
    const json& head = chunks[0]["choices"][0]["delta"]["tool_calls"][0];
    EXPECT_EQ(head["id"], want[0]["id"]);
    EXPECT_EQ(head["function"]["name"], "get_weather");
    EXPECT_EQ(chunks[1]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"],
              want[0]["function"]["arguments"]);
    EXPECT_EQ(chunks[2]["choices"][0]["finish_reason"], "tool_calls");
  }
  EXPECT_EQ(want[0]["function"]["arguments"], R"({"city":"Oslo"})");
}

// A vocabulary whose markers are control tokens: 256 [TOOL_CALLS] (Mistral), 257 <|python_tag|> (Llama 3).
testing_fakes::ByteTokenizer marker_vocab() {
  testing_fakes::ByteTokenizer tok;
  tok.names = {"[TOOL_CALLS]", "<|python_tag|>"};
  return tok;
}

std::vector<int32_t> ids(const std::string& text) {
  return std::vector<int32_t>(text.begin(), text.end());
}

// The chat request's events as the engine gives them for a scripted model emitting `reply` (token
// ids), with the tools set up as the server's job does (shown markers, lazy or whole grammar), through
// the response builder: the non-streamed choice, and the streamed one rebuilt from its chunks.
std::pair<json, json> run_tools(ToolSyntax syntax, const std::vector<int32_t>& reply, const char* choice) {
  const testing_fakes::ByteTokenizer tok = marker_vocab();
  json body{{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
            {"tools", json::parse(kTools)},
            {"tool_choice", choice}};
  auto r = parse_request(body.dump(), true);
  EXPECT_TRUE(r.ok()) << r.message();
  r->tool_syntax = syntax;
  const ToolMarkerTokens marks = tool_marker_tokens(syntax, tok);
  for (const auto& [text, id] : marks) {
    r->params.shown_tokens.push_back(id);
    r->tool_hidden.push_back(text);
  }
  auto gbnf = tool_calls_grammar(syntax, r->tool_fns, {.required = r->tool_required, .tokens = marks});
  EXPECT_TRUE(gbnf.ok()) << gbnf.message();
  auto g = Grammar::parse(*gbnf);
  EXPECT_TRUE(g.ok()) << g.message();
  r->params.grammar = std::make_shared<const Grammar>(std::move(*g));
  if (!r->tool_required) r->params.grammar_trigger = tool_call_trigger(syntax);
  r->params.prompt = {'h'};
  r->params.n_predict = 120;
  r->params.sampling.temp = 0;
  r->prompts = {ApiPrompt{"x", {'h'}}};
  std::vector<int32_t> script = {'_'};
  script.insert(script.end(), reply.begin(), reply.end());
  script.push_back(259);
  testing_fakes::EvalRunner runner;
  auto e = Engine::create(
      runner,
      [&](int) -> Result<std::unique_ptr<Session>> {
        return std::unique_ptr<Session>(std::make_unique<testing_fakes::ScriptSession>(256, script));
      },
      &tok, testing_fakes::kVocab, {.n_slots = 1, .manual_step = true});
  EXPECT_TRUE(e.ok()) << e.message();
  std::vector<CompletionEvent> events;
  EXPECT_TRUE((*e)->submit(r->params,
                           [&](const CompletionEvent& ev) {
                             events.push_back(ev);
                             return true;
                           })
                  .ok());
  for (int i = 0; i < 300 && (*e)->step(); ++i) {
  }
  ResponseBuilder whole(ApiResponseHead{"chatcmpl-5", "m", 0, true}, *r, tok);
  r->stream = true;
  ResponseBuilder streamed(ApiResponseHead{"chatcmpl-5", "m", 0, true}, *r, tok);
  std::string sse;
  for (const CompletionEvent& ev : events) {
    whole.add(0, ev);
    sse += streamed.sse(0, ev);
  }
  EXPECT_TRUE(whole.done() && streamed.done());
  json rebuilt{
      {"content", ""}, {"tool_calls", json::array()}, {"arguments", json::array()}, {"arg_chunks", 0}};
  for (const json& ch : sse_chunks(sse)) {
    const json& d = ch["choices"][0]["delta"];
    if (d.contains("content"))
      rebuilt["content"] = rebuilt["content"].get<std::string>() + d["content"].get<std::string>();
    for (const json& t : d.value("tool_calls", json::array())) {
      if (t.contains("id")) {
        rebuilt["tool_calls"].push_back(t["function"]["name"]);
        rebuilt["arguments"].push_back("");
      } else {
        rebuilt["arg_chunks"] = rebuilt["arg_chunks"].get<int>() + 1;
      }
      json& a = rebuilt["arguments"][t["index"].get<size_t>()];
      a = a.get<std::string>() + t["function"]["arguments"].get<std::string>();
    }
  }
  return {whole.body()["choices"][0], rebuilt};
}

TEST(ToolCallTokens, MarkersAreTheVocabularysControlTokens) {
  const testing_fakes::ByteTokenizer tok = marker_vocab();
  EXPECT_EQ(tool_marker_tokens(ToolSyntax::mistral, tok), (ToolMarkerTokens{{"[TOOL_CALLS]", 256}}));
  EXPECT_EQ(tool_marker_tokens(ToolSyntax::llama3, tok), (ToolMarkerTokens{{"<|python_tag|>", 257}}));
  EXPECT_TRUE(tool_marker_tokens(ToolSyntax::hermes, tok).empty());  // no such token: text
  // A required call's grammar opens with the token: nothing else is allowed first, nor its text.
  ToolFunction f{"get_weather", json::parse(kTools)[0]["function"]["parameters"]};
  auto gbnf = tool_calls_grammar(ToolSyntax::mistral, {f},
                                 {.required = true, .tokens = tool_marker_tokens(ToolSyntax::mistral, tok)});
  ASSERT_TRUE(gbnf.ok()) << gbnf.message();
  EXPECT_EQ(gbnf->rfind("root ::= <[256]> \"[\"", 0), 0u) << *gbnf;
  auto parsed = Grammar::parse(*gbnf);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  auto g = std::make_shared<const Grammar>(std::move(*parsed));
  EXPECT_FALSE(
      grammar_matches(*g, R"([TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo"}}])"));
  GrammarConstraint c(g, std::make_shared<GrammarVocab>(tok));
  std::vector<uint8_t> mask;
  c.allowed_tokens(&mask);
  EXPECT_EQ(std::count(mask.begin(), mask.end(), 1), 1);
  EXPECT_EQ(mask[256], 1);
}

// The model emits [TOOL_CALLS] as token 256 after prose: one call, the content without the marker,
// streamed and not; with required the grammar forces token 256 though the model would write prose.
TEST(ToolCallTokens, ControlTokenMarkersParseIntoCalls) {
  std::vector<int32_t> reply = ids("Hi. ");
  reply.push_back(256);
  const std::vector<int32_t> call = ids(R"([{"name": "get_weather", "arguments": {"city": "Oslo"}}])");
  reply.insert(reply.end(), call.begin(), call.end());
  for (const char* choice : {"auto", "required"}) {
    SCOPED_TRACE(choice);
    const bool required = std::string(choice) == "required";
    // Required: the script's 'N' (prose) is not allowed where the grammar forces token 256.
    std::vector<int32_t> forced = {'N'};
    forced.insert(forced.end(), call.begin(), call.end());
    auto [whole, streamed] = run_tools(ToolSyntax::mistral, required ? forced : reply, choice);
    EXPECT_EQ(whole["finish_reason"], "tool_calls") << whole;
    ASSERT_EQ(whole["message"]["tool_calls"].size(), 1u) << whole;
    EXPECT_EQ(whole["message"]["tool_calls"][0]["function"]["name"], "get_weather");
    EXPECT_EQ(whole["message"]["tool_calls"][0]["function"]["arguments"], R"({"city":"Oslo"})");
    if (required) {
      EXPECT_TRUE(whole["message"]["content"].is_null()) << whole;
    } else {
      EXPECT_EQ(whole["message"]["content"], "Hi.");
    }
    EXPECT_EQ(streamed["content"], whole["message"]["content"].is_null() ? "" : whole["message"]["content"]);
    EXPECT_EQ(streamed["tool_calls"], json::array({"get_weather"}));
    EXPECT_EQ(streamed["arguments"], json::array({R"({"city":"Oslo"})"}));
  }
}

// Under the grammar a call's arguments stream as the model writes them (a chunk per token here),
// and rebuild to the non-streamed call; the <|python_tag|> token before it is not content.
TEST(ToolCallTokens, ArgumentsStreamAsTheyAreGenerated) {
  std::vector<int32_t> reply = {257};
  for (int32_t t : ids(R"({"name": "get_weather", "parameters": {"city": "Oslo", "days": 3}})"))
    reply.push_back(t);
  auto [whole, streamed] = run_tools(ToolSyntax::llama3, reply, "auto");
  ASSERT_EQ(whole["message"]["tool_calls"].size(), 1u) << whole;
  EXPECT_TRUE(whole["message"]["content"].is_null());
  EXPECT_EQ(whole["message"]["tool_calls"][0]["function"]["arguments"], R"({"city":"Oslo","days":3})");
  EXPECT_EQ(streamed["content"], "");
  EXPECT_EQ(streamed["arguments"], json::array({R"({"city":"Oslo","days":3})"}));
  EXPECT_GE(streamed["arg_chunks"].get<int>(), 10) << streamed;
  // Cut by max_tokens after it opened: the partial call stands (as vLLM's), its text is not content.
  ToolCallParser p(ToolSyntax::hermes, {}, /*stream=*/true);
  ToolCallDelta d = p.feed("Hi <tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, ");
  EXPECT_EQ(d.content, "Hi");
  EXPECT_TRUE(d.opened);
  EXPECT_EQ(d.open_name, "f");
  EXPECT_EQ(d.args_delta, "{\"a\":[1,");
  d = p.feed("2");
  EXPECT_FALSE(d.opened);
  EXPECT_EQ(d.args_delta, "2");
  d = p.finish();
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.content, "");
}

// Prose (a call's JSON included) without the marker token is content; the marker token before prose
// (python_tag then no call) or before a malformed call never shows in the content.
TEST(ToolCallTokens, PlainTextIsNeverACallAndMarkersNeverContent) {
  const std::string prose = R"(Write [{"name": "get_weather", "arguments": {}}] to call.)";
  auto [whole, streamed] = run_tools(ToolSyntax::mistral, ids(prose), "auto");
  EXPECT_EQ(whole["finish_reason"], "stop");
  EXPECT_FALSE(whole["message"].contains("tool_calls"));
  EXPECT_EQ(whole["message"]["content"], prose);
  EXPECT_EQ(streamed["content"], prose);
  std::vector<int32_t> tagged = {257};
  for (int32_t t : ids("Hello.")) tagged.push_back(t);
  std::tie(whole, streamed) = run_tools(ToolSyntax::llama3, tagged, "auto");
  EXPECT_FALSE(whole["message"].contains("tool_calls"));
  EXPECT_EQ(whole["message"]["content"], "Hello.");
  EXPECT_EQ(streamed["content"], "Hello.");
  const ToolCallDelta d = parse_tool_calls(ToolSyntax::mistral, "Hi. [TOOL_CALLS]oops", {"[TOOL_CALLS]"});
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.content, "Hi. oops");
}

}  // namespace
}  // namespace strata::server
