// Structured output on the bundled model: every schema's seeded runs through the engine that stop
// give JSON that validates against the schema; end to end, response_format json_schema / json_object
// and grammar answer text of that shape, and bad constraints are 400s naming the field.
#include <gtest/gtest.h>

#include <regex>

#include "runtime/fake_session.h"
#include "runtime/grammar_matcher.h"
#include "server/http_fixture.h"
#include "server/json_schema_grammar.h"
#include "server/response_builder.h"

namespace strata::server {
namespace {

using nlohmann::json;
using testing::HttpServerTest;

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// minimum / maximum / exclusiveMinimum / exclusiveMaximum.
bool in_bounds(const json& v, const json& s) {
  const double x = v.get<double>();
  return (!s.contains("minimum") || x >= s["minimum"].get<double>()) &&
         (!s.contains("maximum") || x <= s["maximum"].get<double>()) &&
         (!s.contains("exclusiveMinimum") || x > s["exclusiveMinimum"].get<double>()) &&
         (!s.contains("exclusiveMaximum") || x < s["exclusiveMaximum"].get<double>());
}

// format, checked apart from the grammar: std::regex and the calendar.
bool formatted(const std::string& v, const std::string& f) {
  std::smatch m;
  if (f == "date" || f == "date-time") {
    static const std::regex re(R"(^(\d{4})-(\d{2})-(\d{2})([Tt].*)?$)");
    if (!std::regex_match(v, m, re)) return false;
    const int y = std::stoi(m[1]), mo = std::stoi(m[2]), d = std::stoi(m[3]);
    const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    const int days[] = {31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (mo < 1 || mo > 12 || d < 1 || d > days[mo - 1]) return false;
    if (f == "date") return !m[4].matched;
    return m[4].matched && formatted(m[4].str().substr(1), "time");
  }
  if (f == "time")
    return std::regex_match(
        v, std::regex(R"(^([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$)"));
  if (f == "uuid")
    return std::regex_match(v, std::regex(R"(^[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$)"));
  if (f == "email")
    return std::regex_match(
        v,
        std::regex(R"(^[^.@\s"(),:;<>\[\]\\]+(\.[^.@\s"(),:;<>\[\]\\]+)*@)"
                   R"([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)+$)"));
  if (f == "ipv4") {
    static const std::regex re(R"(^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$)");
    if (!std::regex_match(v, m, re)) return false;
    for (int i = 1; i <= 4; ++i)
      if (std::stoi(m[i]) > 255 || (m[i].length() > 1 && m[i].str()[0] == '0')) return false;
    return true;
  }
  return false;
}

// The keywords the schemas below use.
bool validates(const json& v, const json& s, const json& root) {
  if (s.contains("$ref")) {
    const std::string ref = s["$ref"];
    return validates(v, root["$defs"][ref.substr(std::string("#/$defs/").size())], root);
  }
  if (s.contains("const")) return v == s["const"];
  if (s.contains("enum")) return std::find(s["enum"].begin(), s["enum"].end(), v) != s["enum"].end();
  if (s.contains("anyOf")) {
    for (const json& sub : s["anyOf"])
      if (validates(v, sub, root)) return true;
    return false;
  }
  std::string t = s.value("type", "");
  if (t.empty() && (s.contains("pattern") || s.contains("format"))) t = "string";
  if (t == "integer") return v.is_number_integer() && in_bounds(v, s);
  if (t == "number") return v.is_number() && in_bounds(v, s);
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "string") {
    if (!v.is_string()) return false;
    const std::string str = v.get<std::string>();
    const size_t n = code_points(str);
    if (s.contains("pattern") && !std::regex_search(str, std::regex(s["pattern"].get<std::string>())))
      return false;
    if (s.contains("format") && !formatted(str, s["format"])) return false;
    return n >= s.value("minLength", 0u) && n <= s.value("maxLength", 1000000u);
  }
  if (t == "array") {
    if (!v.is_array() || v.size() < s.value("minItems", 0u) || v.size() > s.value("maxItems", 1000000u))
      return false;
    const json prefix = s.value("prefixItems", json::array());
    for (size_t i = 0; i < v.size(); ++i) {
      if (i < prefix.size()) {
        if (!validates(v[i], prefix[i], root)) return false;
      } else if (s.contains("items") && (s["items"] == false || !validates(v[i], s["items"], root))) {
        return false;
      }
    }
    return true;
  }
  if (t == "object") {
    if (!v.is_object()) return false;
    for (const json& r : s.value("required", json::array()))
      if (!v.contains(r.get<std::string>())) return false;
    for (const auto& [k, item] : v.items()) {
      if (!s["properties"].contains(k)) return false;
      if (!validates(item, s["properties"][k], root)) return false;
    }
    return true;
  }
  return true;
}

TEST(StructuredOutputModel, SeededRunsThatStopValidate) {
  auto m = Model::load(::strata::testing::source_dir() + "/tests/data/bundled_smoke.gguf", {.n_threads = 2});
  ASSERT_TRUE(m.ok()) << m.message();
  const Model& model = **m;
  const std::vector<json> schemas = {
      json::parse(R"({"type":"object","properties":{"name":{"type":"string","maxLength":8},
                      "age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false})"),
      json::parse(R"({"type":"array","items":{"enum":["red","green",3]},"minItems":1,"maxItems":4})"),
      json::parse(
          R"({"anyOf":[{"type":"boolean"},{"type":"string","minLength":1,"maxLength":5},{"type":"null"}]})"),
      json::parse(
          R"({"$defs":{"pt":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},
                      "required":["x","y"]}},"type":"object","properties":{"a":{"$ref":"#/$defs/pt"},
                      "tags":{"type":"array","items":{"type":"string","maxLength":4},"maxItems":2}},"required":["a"]})"),
      json::parse(R"({"type":"object","properties":{"n":{"type":"integer","minimum":-5,"maximum":42},
                      "x":{"type":"number","exclusiveMinimum":0,"maximum":3}},"required":["n","x"],
                      "additionalProperties":false})"),
      json::parse(
          R"({"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{2}-[0-9]{2,3}$"},
                      "day":{"type":"string","format":"date"}},"required":["code","day"],"additionalProperties":false})"),
      json::parse(
          R"({"type":"array","prefixItems":[{"type":"string","format":"ipv4"},{"type":"string","format":"uuid"},
                      {"type":"string","format":"time"}],"items":false,"minItems":3})"),
      json::parse(R"({"type":"array","prefixItems":[{"format":"date-time"},{"format":"email"},
                      {"pattern":"^(ab|c)+\\d?$"}],"items":false,"minItems":3})"),
  };
  auto e = Engine::for_model(model, {.n_ctx = 192}, {.n_slots = 4, .manual_step = true});
  ASSERT_TRUE(e.ok()) << e.message();
  constexpr int kRuns = 4;
  std::vector<std::string> text(schemas.size() * kRuns);
  std::vector<CompletionEvent> last(text.size());
  for (size_t si = 0; si < schemas.size(); ++si) {
    auto gbnf = json_schema_to_grammar(schemas[si]);
    ASSERT_TRUE(gbnf.ok()) << gbnf.message();
    auto g = Grammar::parse(*gbnf);
    ASSERT_TRUE(g.ok()) << g.message();
    auto shared = std::make_shared<const Grammar>(std::move(*g));
    for (int run = 0; run < kRuns; ++run) {
      CompletionParams p;
      p.prompt = model.tokenizer().encode("JSON: ", true, true);
      p.n_predict = 128;
      p.sampling.temp = run == 0 ? 0.0f : 0.8f;
      p.sampling.seed = static_cast<uint32_t>(run);
      p.grammar = shared;
      const size_t k = si * kRuns + static_cast<size_t>(run);
      ASSERT_TRUE((*e)->submit(p,
                               [&, k](const CompletionEvent& ev) {
                                 text[k] += ev.text;
                                 if (ev.done) last[k] = ev;
                                 return true;
                               })
                      .ok());
    }
  }
  for (int turn = 0; turn < 5000 && (*e)->step(); ++turn) {
  }
  int stopped = 0;
  for (size_t k = 0; k < text.size(); ++k) {
    const json& schema = schemas[k / kRuns];
    SCOPED_TRACE(schema.dump() + " -> " + text[k]);
    ASSERT_NE(last[k].finish, FinishReason::error) << last[k].error;
    if (last[k].finish != FinishReason::stop) continue;
    ++stopped;
    json v = json::parse(text[k], nullptr, false);
    ASSERT_FALSE(v.is_discarded());
    EXPECT_TRUE(validates(v, schema, schema));
  }
  EXPECT_GE(stopped, static_cast<int>(text.size()) / 2);
}

json post(httplib::Client& c, const char* path, const json& body, int want_status) {
  auto r = c.Post(path, body.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return json();
  EXPECT_EQ(r->status, want_status) << r->body;
  return json::parse(r->body, nullptr, false);
}

TEST_F(HttpServerTest, ResponseFormatAndGrammarShapeTheAnswer) {
  start();
  auto c = client();
  const json schema = json::parse(R"({"type":"object","properties":{"ok":{"type":"boolean"},
                                     "n":{"type":"integer"}},"required":["ok","n"]})");
  json req{
      {"messages", {{{"role", "user"}, {"content", "Answer in JSON"}}}},
      {"max_tokens", 40},
      {"temperature", 0},
      {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "a"}, {"schema", schema}}}}}};
  json b = post(c, "/v1/chat/completions", req, 200);
  const std::string content = b["choices"][0]["message"]["content"];
  if (b["choices"][0]["finish_reason"] == "stop") {
    json v = json::parse(content, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << content;
    EXPECT_TRUE(v["ok"].is_boolean() && v["n"].is_number_integer()) << content;
  } else {
    auto gbnf = json_schema_to_grammar(schema);
    ASSERT_TRUE(gbnf.ok()) << gbnf.message();
    auto g = Grammar::parse(gbnf.value());
    EXPECT_TRUE(GrammarMatcher(std::make_shared<Grammar>(std::move(*g))).can_accept(content)) << content;
  }
  req["response_format"] = {{"type", "json_object"}};
  b = post(c, "/v1/chat/completions", req, 200);
  EXPECT_EQ(b["choices"][0]["message"]["content"].get<std::string>().substr(0, 1), "{");
  json greq{{"prompt", "Say"}, {"max_tokens", 10}, {"grammar", "root ::= (\" yes\" | \" no\"){2}"}};
  b = post(c, "/v1/completions", greq, 200);
  const std::string t = b["choices"][0]["text"];
  EXPECT_TRUE(t == " yes yes" || t == " yes no" || t == " no yes" || t == " no no") << t;
  EXPECT_EQ(b["choices"][0]["finish_reason"], "stop");

  greq["grammar"] = "root ::= yes";
  b = post(c, "/v1/completions", greq, 400);
  EXPECT_EQ(b["error"]["message"], "'grammar': grammar 1:10: rule 'yes' is not defined");
  req["response_format"] = {{"type", "json_schema"},
                            {"json_schema", {{"schema", {{"type", "string"}, {"format", "hostname"}}}}}};
  b = post(c, "/v1/chat/completions", req, 400);
  EXPECT_EQ(
      b["error"]["message"],
      "'response_format.json_schema.schema': JSON Schema 'format' at /: 'hostname' is not supported (date, "
      "time, date-time, uuid, email, ipv4 are)");
}

}  // namespace
}  // namespace strata::server
