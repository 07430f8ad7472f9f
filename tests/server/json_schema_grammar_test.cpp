// JSON Schema -> GBNF: the grammars accept JSON that fits the schema and reject JSON that does not;
// unsupported keywords are errors naming them; the request fields (grammar, json_schema,
// response_format) compile into the request's grammar or are 400s naming the field.
#include "server/json_schema_grammar.h"

#include <gtest/gtest.h>

#include "runtime/grammar_matcher.h"
#include "server/openai_api.h"

namespace strata::server {
namespace {

using nlohmann::json;

Grammar schema_grammar(const json& schema) {
  auto text = json_schema_to_grammar(schema);
  EXPECT_TRUE(text.ok()) << text.message();
  if (!text.ok()) return Grammar();
  auto g = Grammar::parse(*text);
  EXPECT_TRUE(g.ok()) << g.message() << "\n" << *text;
  return g.ok() ? std::move(*g) : Grammar();
}

struct Case {
  json schema;
  std::vector<std::string> good, bad;
};

TEST(JsonSchemaGrammar, AcceptsWhatFitsAndRejectsTheRest) {
  const std::vector<Case> cases = {
      {json::parse(R"({"type":"object","properties":{"age":{"type":"integer"},"name":{"type":"string"}},
                      "required":["name"]})"),
       {R"({"age": 3, "name": "x"})", R"({"name":"a\"b"})", R"({ "name": "" })"},
       {R"({"age": 3})", R"({"name": 1})", R"({"name": "x", "extra": 1})", R"({"age": 1.5, "name": "x"})"}},
      {json::parse(R"({"type":"array","items":{"enum":["a",1,null]},"minItems":1,"maxItems":2})"),
       {R"(["a"])", R"([1, null])"},
       {"[]", R"(["a",1,null])", R"(["b"])"}},
      {json::parse(R"({"type":"string","minLength":2,"maxLength":3})"),
       {R"("ab")", R"("\u00e9\n")", "\"abc\""},
       {R"("a")", R"("abcd")"}},
      {json::parse(R"({"anyOf":[{"type":"number"},{"const":"none"}]})"),
       {"-0.5e3", "12", R"("none")"},
       {R"("some")", "01", "1."}},
      {json::parse(R"({"type":["boolean","null"]})"), {"true", "null"}, {"1", "\"true\""}},
      {json::parse(
           R"({"$defs":{"node":{"type":"object","properties":{"next":{"oneOf":[{"$ref":"#/$defs/node"},
                      {"type":"null"}]}},"required":["next"],"additionalProperties":false}},
                      "$ref":"#/$defs/node"})"),
       {R"({"next": null})", R"({"next": {"next": null}})"},
       {R"({"next": 1})", "{}"}},
      {json::parse(R"({"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},
                      "c":{"type":"integer"}}})"),
       {"{}", R"({"a": true})", R"({"b": null, "c": 2})", R"({"a": false, "c": 2})"},
       {R"({"c": 2, "a": true})", R"({,"a": true})", R"({"a": true,})"}},
      {json::parse(R"({"title":"anything","description":"any JSON"})"),
       {R"({"x": [1, {"y": "z"}]})", "[]", "\"s\"", "-3"},
       {"{x}", "[1,]"}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("schema " + std::to_string(i) + ": " + cases[i].schema.dump());
    const Grammar g = schema_grammar(cases[i].schema);
    for (const std::string& s : cases[i].good) EXPECT_TRUE(grammar_matches(g, s)) << s;
    for (const std::string& s : cases[i].bad) EXPECT_FALSE(grammar_matches(g, s)) << s;
  }
}

TEST(JsonSchemaGrammar, UnsupportedKeywordsAreNamed) {
  auto e = json_schema_to_grammar(
      json::parse(R"({"type":"object","properties":{"id":{"type":"string","pattern":"^a"}}})"));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.message(), "JSON Schema keyword 'pattern' at /properties/id is not supported");
  e = json_schema_to_grammar(json::parse(R"({"$ref":"#/components/x"})"));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("'$ref'"), std::string::npos) << e.message();
  e = json_schema_to_grammar(json::parse(R"({"allOf":[{"type":"string"},{"maxLength":2}]})"));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("'allOf'"), std::string::npos) << e.message();
  EXPECT_TRUE(grammar_matches(Grammar::parse(json_object_grammar()).value(), R"({"a": [true]})"));
  EXPECT_FALSE(grammar_matches(Grammar::parse(json_object_grammar()).value(), "[1]"));
}

TEST(JsonSchemaGrammar, RequestFieldsCompileOrAre400sNamingTheField) {
  auto ok = [](const json& body) {
    auto r = parse_request(body.dump(), /*chat=*/false);
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() && r->params.grammar != nullptr;
  };
  auto bad = [](const json& body) {
    auto r = parse_request(body.dump(), /*chat=*/false);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.message();
  };
  const json base{{"prompt", "x"}};
  json b = base;
  b["grammar"] = "root ::= \"yes\" | \"no\"";
  EXPECT_TRUE(ok(b));
  b["grammar"] = "root ::= [a-";
  EXPECT_EQ(bad(b), "'grammar': grammar 1:10: unterminated character class");
  b["grammar"] = 3;
  EXPECT_EQ(bad(b), "'grammar' must be a string (GBNF), got number");
  b = base;
  b["json_schema"] = json{{"type", "integer"}};
  EXPECT_TRUE(ok(b));
  b["json_schema"] = json{{"type", "string"}, {"format", "date"}};
  EXPECT_EQ(bad(b), "'json_schema': JSON Schema keyword 'format' at / is not supported");
  b = base;
  b["response_format"] = json{{"type", "json_object"}};
  EXPECT_TRUE(ok(b));
  b["response_format"] =
      json{{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", {{"type", "boolean"}}}}}};
  EXPECT_TRUE(ok(b));
  b["response_format"] = json{{"type", "json_schema"}, {"json_schema", {{"schema", {{"minimum", 1}}}}}};
  EXPECT_EQ(bad(b),
            "'response_format.json_schema.schema': JSON Schema keyword 'minimum' at / is not supported");
  b["response_format"] = json{{"type", "json_schema"}};
  EXPECT_EQ(bad(b), "'response_format.json_schema.schema' is required for type json_schema");
  b["response_format"] = json{{"type", "yaml"}};
  EXPECT_EQ(bad(b), "'response_format.type' is 'yaml'; it must be text, json_object or json_schema");
  b["response_format"] = json{{"type", "text"}};
  EXPECT_FALSE(ok(b));  // no grammar
  b["response_format"] = json{{"type", "json_object"}};
  b["grammar"] = "root ::= \"a\"";
  EXPECT_EQ(bad(b), "'grammar' and 'response_format' cannot be used together");
}

TEST(JsonSchemaGrammar, ToolChoiceRequiredConstrainsToOneCall) {
  const json tools = json::parse(R"([{"type":"function","function":{"name":"get_weather","parameters":
      {"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},
      {"type":"function","function":{"name":"now"}}])");
  json b{
      {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"tools", tools}, {"tool_choice", "required"}};
  auto r = parse_request(b.dump(), /*chat=*/true);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(r->tool_call);
  ASSERT_EQ(r->messages.size(), 2u);
  EXPECT_EQ(r->messages[0].role, "system");
  EXPECT_NE(r->messages[0].content.find("get_weather"), std::string::npos);
  ASSERT_TRUE(r->params.grammar);
  EXPECT_TRUE(
      grammar_matches(*r->params.grammar, R"({"name": "get_weather", "arguments": {"city": "Oslo"}})"));
  EXPECT_TRUE(grammar_matches(*r->params.grammar, R"({"name":"now","arguments":[1]})"));
  EXPECT_FALSE(grammar_matches(*r->params.grammar, R"({"name": "get_weather", "arguments": {}})"));
  EXPECT_FALSE(grammar_matches(*r->params.grammar, R"({"name": "other", "arguments": {}})"));
  b["tool_choice"] = json{{"type", "function"}, {"function", {{"name", "now"}}}};
  r = parse_request(b.dump(), true);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_FALSE(grammar_matches(*r->params.grammar, R"({"name": "get_weather", "arguments": {"city": "x"}})"));
  b["tool_choice"] = "none";
  r = parse_request(b.dump(), true);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_FALSE(r->tool_call);
  EXPECT_FALSE(r->params.grammar);
  auto bad = [&](const json& body) {
    auto e = parse_request(body.dump(), true);
    EXPECT_FALSE(e.ok());
    return e.ok() ? std::string() : e.message();
  };
  b.erase("tool_choice");  // auto: the job renders and parses the tools
  r = parse_request(b.dump(), true);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(r->tools_auto);
  EXPECT_FALSE(r->tool_call);
  EXPECT_EQ(r->tool_fns.size(), 2u);
  EXPECT_EQ(r->tools.tools.size(), 2u);
  b["tool_choice"] = "sometimes";
  EXPECT_EQ(bad(b), "'tool_choice' is \"sometimes\"; it must be none, auto or required");
  b["tool_choice"] = json{{"type", "function"}, {"function", {{"name", "nope"}}}};
  EXPECT_EQ(bad(b), "'tool_choice' names function 'nope', which is not in 'tools'");
  b["tool_choice"] = "required";
  b["tools"][1]["function"].erase("name");
  EXPECT_EQ(bad(b), "'tools'[1].function.name must be a non-empty string");
  auto completion = parse_request(json{{"prompt", "x"}, {"tools", tools}}.dump(), /*chat=*/false);
  ASSERT_FALSE(completion.ok());
  EXPECT_EQ(completion.message(), "'tools' is not supported by strata serve");
}

}  // namespace
}  // namespace strata::server
