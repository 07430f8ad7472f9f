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
      // additionalProperties as a schema: keys other than the listed (and required) ones, after them
      {json::parse(R"({"type":"object","properties":{"ab":{"type":"integer"}},"required":["ab","id"],
                      "additionalProperties":{"type":"boolean"}})"),
       {R"({"ab": 1, "id": true})", R"({"ab": 1, "id": false, "a": true, "abc": false, "bé": true})",
        R"({"ab": 1, "id": true, "": true, "i": false, "idx": true})"},
       {R"({"ab": 1, "id": true, "ab": true})", R"({"ab": 1, "id": true, "id": true})",
        R"({"ab": 1, "id": true, "x": 2})", R"({"ab": 1})", R"({"ab": 1, "id": 3})",
        R"({"ab": 1, "id": true, "a\u0062": true})"}},
      {json::parse(R"({"type":"object","additionalProperties":{"type":"integer","maximum":9}})"),
       {"{}", R"({"x": 1})", R"({"x": 1, "y": 9})"},
       {R"({"x": 10})", R"({"x": "1"})", R"({"x": 1,})"}},
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
      json::parse(R"({"type":"object","properties":{"id":{"type":"integer","multipleOf":2}}})"));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.message(), "JSON Schema keyword 'multipleOf' at /properties/id is not supported");
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
  b["json_schema"] = json{{"type", "string"}, {"format", "hostname"}};
  EXPECT_EQ(
      bad(b),
      "'json_schema': JSON Schema 'format' at /: 'hostname' is not supported (date, time, date-time, uuid, "
      "email, ipv4 are)");
  b = base;
  b["response_format"] = json{{"type", "json_object"}};
  EXPECT_TRUE(ok(b));
  b["response_format"] =
      json{{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", {{"type", "boolean"}}}}}};
  EXPECT_TRUE(ok(b));
  b["response_format"] = json{{"type", "json_schema"}, {"json_schema", {{"schema", {{"pattern", "(?=a)"}}}}}};
  EXPECT_EQ(
      bad(b),
      "'response_format.json_schema.schema': JSON Schema 'pattern' at /: a '(?' group (lookaround or a named "
      "group) at offset 1 is not supported");
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
  EXPECT_TRUE(r->tools_auto && r->tool_required);  // rendered and parsed as auto; the grammar is the job's
  EXPECT_FALSE(r->params.grammar);
  auto grammar = [&] {
    auto gbnf = tool_calls_grammar(ToolSyntax::hermes, r->tool_fns,
                                   ToolGrammarOptions{.parallel = false, .required = true});
    EXPECT_TRUE(gbnf.ok()) << gbnf.message();
    auto g = Grammar::parse(*gbnf);
    EXPECT_TRUE(g.ok()) << g.message();
    return std::move(*g);
  };
  Grammar g = grammar();
  auto call = [](const std::string& json_text) { return "<tool_call>\n" + json_text + "\n</tool_call>"; };
  EXPECT_TRUE(grammar_matches(g, call(R"({"name": "get_weather", "arguments": {"city": "Oslo"}})")));
  EXPECT_TRUE(grammar_matches(g, call(R"({"name":"now","arguments":[1]})")));
  EXPECT_FALSE(grammar_matches(g, call(R"({"name": "get_weather", "arguments": {}})")));
  EXPECT_FALSE(grammar_matches(g, call(R"({"name": "other", "arguments": {}})")));
  EXPECT_FALSE(grammar_matches(g, "Sure. " + call(R"({"name":"now","arguments":[1]})")));
  b["tool_choice"] = json{{"type", "function"}, {"function", {{"name", "now"}}}};
  r = parse_request(b.dump(), true);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(r->tool_required);
  EXPECT_EQ(r->tools.tools.size(), 2u);  // the model sees every tool; it may call only the named one
  g = grammar();
  EXPECT_FALSE(grammar_matches(g, call(R"({"name": "get_weather", "arguments": {"city": "x"}})")));
  EXPECT_TRUE(grammar_matches(g, call(R"({"name": "now", "arguments": {}})")));
  b["tool_choice"] = "none";
  r = parse_request(b.dump(), true);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_FALSE(r->tools_auto);
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
  EXPECT_FALSE(r->tool_required);
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

TEST(JsonSchemaGrammar, IntegerBoundsAreExact) {
  const std::vector<std::pair<json, std::pair<int64_t, int64_t>>> cases = {
      {json::parse(R"({"type":"integer","minimum":0,"maximum":100})"), {0, 100}},
      {json::parse(R"({"type":"integer","minimum":-37,"maximum":1234})"), {-37, 1234}},
      {json::parse(R"({"type":"integer","exclusiveMinimum":-1000,"exclusiveMaximum":-99})"), {-999, -100}},
      {json::parse(R"({"type":"integer","minimum":17})"), {17, INT64_MAX}},
      {json::parse(R"({"type":"integer","maximum":-5})"), {INT64_MIN, -5}},
      {json::parse(R"({"type":"integer","minimum":0.5,"maximum":9.9})"), {1, 9}},
      {json::parse(R"({"type":"integer","minimum":250,"maximum":250})"), {250, 250}},
      {json::parse(R"({"type":"integer","minimum":9,"exclusiveMaximum":1001})"), {9, 1000}},
  };
  for (const auto& [schema, range] : cases) {
    SCOPED_TRACE(schema.dump());
    const Grammar g = schema_grammar(schema);
    for (int64_t v = -1200; v <= 1300; ++v)
      ASSERT_EQ(grammar_matches(g, std::to_string(v)), v >= range.first && v <= range.second) << v;
    for (int64_t v : {int64_t{123456789}, int64_t{-123456789}})
      EXPECT_EQ(grammar_matches(g, std::to_string(v)), v >= range.first && v <= range.second) << v;
    EXPECT_FALSE(grammar_matches(g, "007"));
    EXPECT_FALSE(grammar_matches(g, "1.0"));
  }
  EXPECT_FALSE(json_schema_to_grammar(json::parse(R"({"type":"integer","minimum":3,"maximum":2})")).ok());
}

TEST(JsonSchemaGrammar, NumberBoundsAreExactForIntegerBounds) {
  const Grammar g = schema_grammar(json::parse(R"({"type":"number","minimum":-2,"exclusiveMaximum":10})"));
  for (const char* s : {"-2", "-2.0", "-1.5", "-0.25", "0", "0.0", "3", "9.999", "9.5"})
    EXPECT_TRUE(grammar_matches(g, s)) << s;
  for (const char* s : {"-2.5", "-3", "10", "10.0", "10.5", "1e3", "11"})
    EXPECT_FALSE(grammar_matches(g, s)) << s;
  const Grammar pos = schema_grammar(json::parse(R"({"exclusiveMinimum":0,"maximum":1})"));
  for (const char* s : {"0.001", "0.5", "1", "1.00"}) EXPECT_TRUE(grammar_matches(pos, s)) << s;
  for (const char* s : {"0", "0.0", "-0.5", "1.01", "2"}) EXPECT_FALSE(grammar_matches(pos, s)) << s;
  const Grammar neg = schema_grammar(json::parse(R"({"type":"number","maximum":-1})"));
  for (const char* s : {"-1", "-1.0", "-1.5", "-20000.25"}) EXPECT_TRUE(grammar_matches(neg, s)) << s;
  for (const char* s : {"-0.5", "0", "-0.99", "1"}) EXPECT_FALSE(grammar_matches(neg, s)) << s;
  auto e = json_schema_to_grammar(json::parse(R"({"type":"number","minimum":0.5})"));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.message(), "JSON Schema 'minimum' at /: only integer bounds are supported for numbers");
}

TEST(JsonSchemaGrammar, PatternsFormatsPrefixItemsAndPropertyCounts) {
  const std::vector<Case> cases = {
      {json::parse(R"({"type":"string","pattern":"^[A-Z]{2}-\\d{3,4}$"})"),
       {R"("AB-123")", R"("ZZ-0000")"},
       {R"("ab-123")", R"("AB-12")", R"("AB-12345")", R"("xAB-123")"}},
      {json::parse(R"({"pattern":"^(cat|dog)s?( [a-z]+)*$"})"),
       {R"("cat")", R"("dogs run fast")"},
       {R"("cow")", R"("cats ")", R"("cat Run")"}},
      {json::parse(R"({"pattern":"^a\\.b\"c\\\\[^x\\s]\\w+$"})"),
       {R"("a.b\"c\\yz_9")", R"("a.b\"c\\\"q")"},
       {R"("aXb\"c\\yz")", R"("a.b\"c\\xz")", R"("a.b\"c\\ z")"}},
      {json::parse(R"({"pattern":"ab"})"), {R"("ab")", R"("xxabyy")"}, {R"("a b")"}},
      {json::parse(R"({"pattern":"^.?(?:x|y){2}$"})"),
       {R"("xy")", "\"\xC3\xA9yx\"", R"("!yy")"},
       {R"("\nxy")"}},
      {json::parse(R"({"format":"date"})"),
       {R"("2024-02-28")", R"("1999-12-31")", R"("2000-04-30")"},
       {R"("2024-02-30")", R"("2024-04-31")", R"("2024-13-01")", R"("24-01-01")"}},
      {json::parse(R"({"format":"time"})"),
       {R"("23:59:59Z")", R"("08:00:00.123+05:30")"},
       {R"("24:00:00Z")", R"("08:00:00")"}},
      {json::parse(R"({"format":"date-time"})"),
       {R"("2024-01-31T10:20:30Z")"},
       {R"("2024-01-31 10:20:30Z")"}},
      {json::parse(R"({"format":"uuid"})"),
       {R"("123e4567-e89b-12d3-a456-426614174000")"},
       {R"("123e4567e89b")"}},
      {json::parse(R"({"format":"email"})"),
       {R"("a.b+c@example.co.uk")"},
       {R"("a@b")", R"(".a@b.c")", R"("a@@b.c")"}},
      {json::parse(R"({"format":"ipv4"})"),
       {R"("192.168.0.255")", R"("0.0.0.0")"},
       {R"("256.1.1.1")", R"("1.2.3")", R"("01.1.1.1")"}},
      {json::parse(
           R"({"properties":{"a":{"type":"null"},"b":{"type":"null"},"c":{"type":"null"}},"required":["c"],
                      "minProperties":2})"),
       {R"({"a": null, "c": null})", R"({"b": null, "c": null})", R"({"a": null, "b": null, "c": null})"},
       {R"({"c": null})", R"({"a": null, "b": null})", "{}"}},
      {json::parse(
           R"({"properties":{"a":{"type":"null"},"b":{"type":"null"},"c":{"type":"null"}},"maxProperties":1})"),
       {"{}", R"({"a": null})", R"({"c": null})"},
       {R"({"a": null, "c": null})", R"({"b": null, "c": null})"}},
      {json::parse(R"({"prefixItems":[{"type":"integer"},{"type":"string"}],"items":false,"minItems":1})"),
       {"[1]", R"([1, "a"])"},
       {"[]", R"(["a"])", R"([1, "a", 2])"}},
      {json::parse(
           R"({"type":"array","prefixItems":[{"type":"boolean"}],"items":{"type":"null"},"maxItems":3})"),
       {"[]", "[true]", "[false, null, null]"},
       {"[null]", "[true, null, null, null]", "[true, 1]"}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("schema " + std::to_string(i) + ": " + cases[i].schema.dump());
    const Grammar g = schema_grammar(cases[i].schema);
    for (const std::string& s : cases[i].good) EXPECT_TRUE(grammar_matches(g, s)) << s;
    for (const std::string& s : cases[i].bad) EXPECT_FALSE(grammar_matches(g, s)) << s;
  }
  EXPECT_FALSE(json_schema_to_grammar(json::parse(R"({"properties":{"a":{}},"minProperties":2})")).ok());
  EXPECT_FALSE(
      json_schema_to_grammar(json::parse(R"({"properties":{"a":{}},"required":["a","b"],"maxProperties":1})"))
          .ok());
  const std::string deep = std::string(100000, '(') + "a" + std::string(100000, ')');
  for (const std::string p : {"^a\\1$", "a\\bc", "a$b", "(?<n>a)", "(a", "a{2,1}", "[a", "*a", "\\", "x{5",
                              "[\\", "(?", "a{1,2}{3}", "()*", "(|a)+", "(a?|b*){2}", deep.c_str()}) {
    auto e = json_schema_to_grammar(json{{"type", "string"}, {"pattern", p}});
    EXPECT_FALSE(e.ok()) << p.substr(0, 20);
    if (!e.ok()) {
      EXPECT_EQ(e.message().rfind("JSON Schema 'pattern' at /: ", 0), 0u) << e.message();
    }
  }
}

}  // namespace
}  // namespace strata::server
