// Tool calls in every syntax (server/tool_calls.h) with a scripted model, since the bundled and
// fixture models cannot call tools: for each syntax a reply with prose and two parallel calls
// parses to those calls, whole and fed in pieces of every size; its calls match the syntax's
// grammar (lazy from the trigger for auto, the whole reply for required) and a one-call grammar
// rejects the second; through the response builder the streamed chunks rebuild the non-streamed
// message; a malformed call is content. Also the Llama 3, Mistral v7 and gpt-oss prompts with tools,
// calls and results, which syntax each chat format gets, and 400s naming the field.
#include <gtest/gtest.h>

#include "runtime/fake_session.h"
#include "runtime/grammar_matcher.h"
#include "server/response_builder.h"
#include "server/tool_calls.h"

namespace strata::server {
namespace {

using nlohmann::json;

const char* kTools =
    R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}])";

const std::string kOslo = R"({"city":"Oslo"})";
const std::string kRome = R"({"city":"Rome","days":2})";

struct Script {
  ToolSyntax syntax;
  std::string prose;          // content before the calls (what the reply shows)
  std::string calls;          // the two calls as the model writes them after the prose
  std::string broken;         // a malformed call
  std::string required = {};  // the two calls as a tool_choice required reply (the grammar's whole text)
};

std::vector<Script> scripts() {
  const std::string d = "｜DSML｜";
  const std::string h = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>";
  std::vector<Script> out = {
      {ToolSyntax::hermes, "Sure.",
       "\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n"
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\", \"days\": "
       "2}}\n</tool_call>",
       "<tool_call>{\"name\": \"get_weather\", \"arguments\": [}</tool_call>"},
      {ToolSyntax::dsml, "Sure.",
       "\n\n<" + d + "tool_calls>\n<" + d + "invoke name=\"get_weather\">\n<" + d +
           "parameter name=\"city\" string=\"true\">Oslo</" + d + "parameter>\n</" + d + "invoke>\n<" + d +
           "invoke name=\"get_weather\">\n<" + d + "parameter name=\"city\" string=\"true\">Rome</" + d +
           "parameter>\n<" + d + "parameter name=\"days\" string=\"false\">2</" + d + "parameter>\n</" + d +
           "invoke>\n</" + d + "tool_calls>",
       "<" + d + "tool_calls><" + d + "invoke name=\"get_weather\">oops</" + d + "invoke></" + d +
           "tool_calls>"},
      {ToolSyntax::llama3, "",
       "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}\n"
       "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\", \"days\": 2}}",
       "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"]}"},
      {ToolSyntax::mistral, "Sure.",
       "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}, {\"name\": "
       "\"get_weather\", "
       "\"arguments\": {\"city\": \"Rome\", \"days\": 2}}]",
       "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": 7}]"},
      {ToolSyntax::harmony, "<|channel|>analysis<|message|>Two cities.<|end|>",
       "<|start|>assistant" + h + "{\"city\": \"Oslo\"}<|call|><|start|>assistant" + h +
           "{\"city\": \"Rome\", \"days\": 2}<|call|>",
       "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": <|call|>"},
  };
  for (Script& s : out) {  // required: no prose, the calls right after the reply's opening
    s.required = s.calls;
    if (s.syntax == ToolSyntax::hermes) s.required.erase(0, 1);
    if (s.syntax == ToolSyntax::harmony) s.required.erase(0, std::string("<|start|>assistant").size());
  }
  return out;
}

const char* name(ToolSyntax s) {
  switch (s) {
    case ToolSyntax::hermes:
      return "hermes";
    case ToolSyntax::dsml:
      return "dsml";
    case ToolSyntax::llama3:
      return "llama3";
    case ToolSyntax::mistral:
      return "mistral";
    case ToolSyntax::harmony:
      return "harmony";
  }
  return "?";
}

void expect_two_calls(const std::vector<ToolCall>& calls) {
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].name, "get_weather");
  EXPECT_EQ(calls[0].arguments, kOslo);
  EXPECT_EQ(calls[1].name, "get_weather");
  EXPECT_EQ(calls[1].arguments, kRome);
}

TEST(ToolFormats, EachSyntaxParsesTwoCallsWholeAndInPieces) {
  for (const Script& s : scripts()) {
    SCOPED_TRACE(name(s.syntax));
    const std::string reply = s.prose + s.calls;
    const ToolCallDelta whole = parse_tool_calls(s.syntax, reply);
    EXPECT_EQ(whole.content, s.prose);
    expect_two_calls(whole.calls);
    for (size_t step = 1; step <= 9; ++step) {
      ToolCallParser p(s.syntax);
      std::string content;
      std::vector<ToolCall> calls;
      auto take = [&](ToolCallDelta d) {
        content += d.content;
        for (ToolCall& c : d.calls) calls.push_back(std::move(c));
      };
      for (size_t at = 0; at < reply.size(); at += step)
        take(p.feed(std::string_view(reply).substr(at, step)));
      take(p.finish());
      EXPECT_EQ(content, s.prose) << "step " << step;
      expect_two_calls(calls);
    }
    // A malformed call, alone or after prose, comes back as the text it was.
    for (const std::string& text : {s.broken, "Hm. " + s.broken}) {
      const ToolCallDelta bad = parse_tool_calls(s.syntax, text);
      EXPECT_TRUE(bad.calls.empty()) << text;
      EXPECT_EQ(bad.content, text);
    }
    // A plain answer is its text.
    EXPECT_EQ(parse_tool_calls(s.syntax, "It is sunny. [x] {y} <z>").content, "It is sunny. [x] {y} <z>");
  }
}

TEST(ToolFormats, EachSyntaxsGrammarIsItsCalls) {
  const ToolFunction f{"get_weather", json::parse(kTools)[0]["function"]["parameters"]};
  const ToolFunction other{"now", json::object()};
  for (const Script& s : scripts()) {
    SCOPED_TRACE(name(s.syntax));
    const std::string trigger = tool_call_trigger(s.syntax);
    const size_t at = s.calls.find(trigger);
    ASSERT_NE(at, std::string::npos);
    const std::string lazy_text = s.calls.substr(at);
    // The first call alone: up to where the second one's separator starts.
    const std::string second =
        s.syntax == ToolSyntax::mistral ? ", {"
        : s.syntax == ToolSyntax::dsml
            ? "<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Rome"
        : s.syntax == ToolSyntax::harmony
            ? "<|start|>assistant<|channel|>commentary to=functions.get_weather "
              "<|constrain|>json<|message|>{\"city\": \"Rome\""
            : "\n";
    for (bool required : {false, true}) {
      for (bool parallel : {false, true}) {
        SCOPED_TRACE(std::string(required ? "required" : "auto") + (parallel ? " parallel" : " one"));
        auto gbnf = tool_calls_grammar(s.syntax, {f, other},
                                       ToolGrammarOptions{.parallel = parallel, .required = required});
        ASSERT_TRUE(gbnf.ok()) << gbnf.message();
        auto g = Grammar::parse(*gbnf);
        ASSERT_TRUE(g.ok()) << g.message() << "\n" << *gbnf;
        const std::string text = required ? s.required : lazy_text;
        EXPECT_EQ(grammar_matches(*g, text), parallel) << *gbnf;
        // Both calls; one call (the first cut where the second begins, closed as the syntax closes).
        std::string one = text.substr(0, text.rfind(second));
        if (s.syntax == ToolSyntax::mistral) one += "]";
        if (s.syntax == ToolSyntax::dsml) one += "</｜DSML｜tool_calls>";
        if (s.syntax == ToolSyntax::hermes) one = text.substr(0, text.find("</tool_call>") + 12);
        if (s.syntax == ToolSyntax::llama3) one = text.substr(0, text.find('\n'));
        EXPECT_TRUE(grammar_matches(*g, one)) << one << "\n" << *gbnf;
        // Another function's name, or prose in a required reply, is not a call of these tools.
        std::string renamed = one;
        renamed.replace(renamed.find("get_weather"), 11, "get_whether");
        EXPECT_FALSE(grammar_matches(*g, renamed));
        if (required) {
          EXPECT_FALSE(grammar_matches(*g, "Sure. " + one));
          if (!s.prose.empty()) {
            EXPECT_FALSE(grammar_matches(*g, s.prose + s.calls)) << "reasoning only when thinking";
          }
        }
      }
    }
  }
  // Thinking on: DeepSeek-V4's reasoning, gpt-oss's analysis channel before the calls.
  for (const Script& s : scripts()) {
    if (s.syntax != ToolSyntax::harmony && s.syntax != ToolSyntax::dsml) continue;
    auto gbnf = tool_calls_grammar(s.syntax, {f}, ToolGrammarOptions{.required = true, .thinking = true});
    ASSERT_TRUE(gbnf.ok()) << gbnf.message();
    auto g = Grammar::parse(*gbnf);
    ASSERT_TRUE(g.ok()) << g.message();
    const std::string reasoning =
        s.syntax == ToolSyntax::dsml ? "Two cities, so two calls.</think>" : s.prose;
    EXPECT_TRUE(grammar_matches(*g, reasoning + s.calls)) << name(s.syntax);
    EXPECT_FALSE(grammar_matches(*g, "Sure. " + s.required)) << name(s.syntax);
  }
  auto bad = tool_calls_grammar(ToolSyntax::mistral,
                                {ToolFunction{"f", json{{"type", "object"}, {"multipleOf", 2}}}}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("tool 'f' parameters:"), std::string::npos) << bad.message();
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

// A scripted reply in each syntax, with tool_choice auto and required, streamed in events of 3
// bytes and not: the streamed chunks rebuild the non-streamed message (content, two calls with ids,
// names, arguments, streamed as they come where the syntax allows; finish_reason tool_calls); a
// malformed call (no grammar) is content with finish_reason stop.
TEST(ToolFormats, RoundTripsStreamedAndNot) {
  auto any_grammar = Grammar::parse("root ::= \"x\"");
  ASSERT_TRUE(any_grammar.ok());
  testing_fakes::ByteTokenizer tok;
  for (const Script& s : scripts()) {
    for (const char* choice : {"auto", "required"}) {
      for (bool broken : {false, true}) {
        SCOPED_TRACE(std::string(name(s.syntax)) + " " + choice + (broken ? " broken" : ""));
        const std::string reply = broken                          ? s.broken
                                  : std::string(choice) == "auto" ? s.prose + s.calls
                                                                  : s.required;
        json want;
        for (bool stream : {false, true}) {
          json body{{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                    {"tools", json::parse(kTools)},
                    {"tool_choice", choice},
                    {"stream", stream}};
          auto r = parse_request(body.dump(), true);
          ASSERT_TRUE(r.ok()) << r.message();
          r->tool_syntax = s.syntax;
          r->prompts = {ApiPrompt{"x", {1}}};
          // Well-formed calls as under the tools' grammar (the server sets it): arguments stream.
          if (!broken) r->params.grammar = std::make_shared<const Grammar>(*any_grammar);
          ResponseBuilder b(ApiResponseHead{"chatcmpl-9", "m", 0, true}, *r, tok);
          std::string sse;
          for (size_t at = 0; at < reply.size(); at += 3) {
            CompletionEvent ev;
            ev.text = reply.substr(at, 3);
            ev.done = at + 3 >= reply.size();
            if (stream) {
              sse += b.sse(0, ev);
            } else {
              b.add(0, ev);
            }
          }
          ASSERT_TRUE(b.done());
          if (!stream) {
            want = b.body()["choices"][0];
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
          EXPECT_EQ(finish, want["finish_reason"]);
          if (broken) {
            EXPECT_EQ(content, want["message"]["content"]);
            EXPECT_TRUE(calls.empty());
          } else {
            EXPECT_EQ(want["message"]["content"].is_null() ? std::string()
                                                           : want["message"]["content"].get<std::string>(),
                      content);
            EXPECT_EQ(calls, want["message"]["tool_calls"]) << sse;
          }
        }
        if (broken) {
          EXPECT_EQ(want["finish_reason"], "stop");
          EXPECT_EQ(want["message"]["content"], reply);
          EXPECT_FALSE(want["message"].contains("tool_calls"));
          continue;
        }
        EXPECT_EQ(want["finish_reason"], "tool_calls");
        ASSERT_EQ(want["message"]["tool_calls"].size(), 2u);
        EXPECT_EQ(want["message"]["tool_calls"][0]["id"], "call_chatcmpl-9-0");
        EXPECT_EQ(want["message"]["tool_calls"][1]["id"], "call_chatcmpl-9-0-1");
        EXPECT_EQ(want["message"]["tool_calls"][0]["function"]["arguments"], kOslo);
        EXPECT_EQ(want["message"]["tool_calls"][1]["function"]["arguments"], kRome);
      }
    }
  }
}

// system, user, an assistant call, two tool results; rendered with the format's inserts.
std::string render(ChatFormat f) {
  nlohmann::ordered_json body{
      {"messages", nlohmann::ordered_json::parse(
                       R"([{"role": "system", "content": "S"}, {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"days\": 2}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "12C"}, {"role": "tool", "content": "sunny"}])")},
      {"tools", nlohmann::ordered_json::parse(kTools)}};
  auto r = parse_request(body.dump(), /*chat=*/true);
  EXPECT_TRUE(r.ok()) << r.message();
  if (!r.ok()) return "";
  ChatInserts inserts;
  Status st = apply_chat_tools(f, r->tools, &r->messages, &inserts);
  EXPECT_TRUE(st.ok()) << st.message();
  auto text = chat_apply_inserts(f, r->messages, inserts, ChatOptions{.has_tools = true});
  EXPECT_TRUE(text.ok()) << text.message();
  return text.ok() ? *text : "";
}

TEST(ToolFormats, Llama3PromptIsItsTemplates) {
  const std::string s = render(ChatFormat::llama3);
  EXPECT_EQ(
      s.rfind(
          "<|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>"
          "\n\nGiven the following functions, please respond with a JSON for a function call with its "
          "proper arguments that best answers the given prompt.\n\nRespond in the format {\"name\": "
          "function name, \"parameters\": dictionary of argument name and its value}.Do not use "
          "variables.\n\n{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": "
          "\"get_weather\",\n        \"parameters\": {\n            \"type\": \"object\",\n",
          0),
      0u)
      << s;
  const std::string tail =
      "            \"required\": [\n                \"city\"\n            ]\n        }\n    "
      "}\n}\n\nweather?<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": "
      "{\"city\": "
      "\"Oslo\", \"days\": 2}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n12C<|eot_id|>"
      "<|start_header_id|>ipython<|end_header_id|>\n\nsunny<|eot_id|><|start_header_id|>assistant<|end_"
      "header_id|>\n\n";
  ASSERT_GE(s.size(), tail.size());
  EXPECT_EQ(s.substr(s.size() - tail.size()), tail) << s;
}

TEST(ToolFormats, MistralV7PromptIsItsTemplates) {
  EXPECT_EQ(
      render(ChatFormat::mistral_v7),
      "[SYSTEM_PROMPT] S[/SYSTEM_PROMPT][AVAILABLE_TOOLS][{\"type\": \"function\", \"function\": {\"name\": "
      "\"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": "
      "\"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}][/AVAILABLE_TOOLS][INST] "
      "weather?[/INST] [TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", "
      "\"days\": "
      "2}, \"id\": \"c1\"}]</s>[TOOL_RESULTS]{\"content\": \"12C\", \"call_id\": \"c1\"}[/TOOL_RESULTS]"
      "[TOOL_RESULTS]{\"content\": \"sunny\"}[/TOOL_RESULTS]");
}

TEST(ToolFormats, GptOssPromptIsHarmony) {
  EXPECT_EQ(
      render(ChatFormat::gpt_oss),
      "<|start|>system<|message|>S<|end|><|start|>developer<|message|># Tools\n\n## functions\n\nnamespace "
      "functions {\n\ntype get_weather = (_: {\ncity: string,\ndays?: number,\n}) => any;\n\n} // namespace "
      "functions<|end|><|start|>user<|message|>weather?<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\", \"days\": 2}<|call|>"
      "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>12C<|end|>"
      "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>sunny<|end|>"
      "<|start|>assistant");
}

// The syntax follows the chat format as strata detects it (templates' markers, the architecture).
TEST(ToolFormats, SyntaxFollowsTheChatFormat) {
  EXPECT_EQ(tool_syntax_for(ChatFormat::chatml), ToolSyntax::hermes);
  EXPECT_EQ(tool_syntax_for(ChatFormat::phi3), ToolSyntax::hermes);
  EXPECT_EQ(tool_syntax_for(ChatFormat::deepseek4), ToolSyntax::dsml);
  EXPECT_EQ(tool_syntax_for(ChatFormat::llama3), ToolSyntax::llama3);
  EXPECT_EQ(tool_syntax_for(ChatFormat::mistral_v7), ToolSyntax::mistral);
  EXPECT_EQ(tool_syntax_for(ChatFormat::mistral_v7_tekken), ToolSyntax::mistral);
  EXPECT_EQ(tool_syntax_for(ChatFormat::gpt_oss), ToolSyntax::harmony);
  auto arch = chat_format_choose(std::nullopt, "", "gpt-oss");
  ASSERT_TRUE(arch.ok()) << arch.message();
  EXPECT_EQ(arch->format, ChatFormat::gpt_oss);
  EXPECT_EQ(arch->source, ChatFormatSource::arch_default);
  EXPECT_EQ(chat_format_detect("{{ '<|start_header_id|>' + role + '<|end_header_id|>' }}").value(),
            ChatFormat::llama3);
  EXPECT_EQ(
      chat_format_detect("{{ '[SYSTEM_PROMPT]' + s + '[/SYSTEM_PROMPT]' }}{{ '[INST]' + m + '[/INST]' }}")
          .value(),
      ChatFormat::mistral_v7);
}

TEST(ToolFormats, BadToolRequestsAre400sNamingTheField) {
  auto bad = [](const std::string& extra) {
    auto r = parse_request(R"({"messages": [{"role": "user", "content": "x"}], )" + extra + "}", true);
    return r.ok() ? std::string("ok") : r.message();
  };
  const std::string tools = std::string(R"("tools": )") + kTools;
  EXPECT_EQ(bad(R"("tools": {"a": 1})"), "'tools' must be an array, got object");
  EXPECT_EQ(bad(R"("tools": [{"type": "function"}])"),
            "'tools'[0] must be {\"type\": \"function\", \"function\": {...}}");
  EXPECT_NE(bad(tools + R"(, "parallel_tool_calls": "yes")").find("'parallel_tool_calls'"),
            std::string::npos);
  EXPECT_EQ(bad(tools + R"(, "tool_choice": {"type": "function", "function": {"name": "f"}})"),
            "'tool_choice' names function 'f', which is not in 'tools'");
  EXPECT_NE(bad(tools + R"(, "tool_choice": 3)").find("'tool_choice' must be"), std::string::npos);
  EXPECT_NE(bad(tools + R"(, "tool_choice": "required", "grammar": "root ::= \"a\"")")
                .find("'tools' cannot be used"),
            std::string::npos);
  EXPECT_EQ(bad(tools + R"(, "tool_choice": "required")"), "ok");
}

}  // namespace
}  // namespace strata::server
