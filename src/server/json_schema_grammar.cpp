#include "server/json_schema_grammar.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "server/json_schema_numbers.h"
#include "server/json_schema_pattern.h"
#include "text/utf8.h"

namespace strata::server {

using nlohmann::json;

namespace {

const char* const kPrimitives = R"(ws ::= " "?
char ::= [^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
string ::= "\"" char* "\""
integer ::= "-"? ("0" | [1-9] [0-9]{0,15})
number ::= integer ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{" ws (string ws ":" ws value ws ("," ws string ws ":" ws value ws)*)? "}"
array ::= "[" ws (value ws ("," ws value ws)*)? "]"
)";

// A GBNF string literal matching exactly `text`.
std::string literal(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// The characters of a string `format` (between the quotes); nullptr for a format not supported.
// RFC 3339 full-date / full-time / date-time, RFC 4122 UUIDs, dotted-quad IPv4, and e-mail as
// local@domain with dot-separated atoms (no quoted local parts or address literals).
const char* string_format(const std::string& f) {
  static const std::map<std::string, std::string> formats = [] {
    // Days that every year has in each month (no 29 February).
    const std::string date =
        R"([0-9]{4} "-" (("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | )"
        R"(("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02-" ("0" [1-9] | "1" [0-9] | "2" [0-8])))";
    const std::string time = R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,9})? )"
                             R"(("Z" | "z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))";
    const std::string hex = "[0-9a-fA-F]";
    const std::string atom = "[a-zA-Z0-9!#$%&'*+/=?^_`{|}~-]{1,32}";
    const std::string label = "[a-zA-Z0-9] ([a-zA-Z0-9-]{0,20} [a-zA-Z0-9])?";
    const std::string octet = R"(("25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9]))";
    return std::map<std::string, std::string>{
        {"date", date},
        {"time", time},
        {"date-time", date + " [Tt] " + time},
        {"uuid",
         hex + "{8} \"-\" " + hex + "{4} \"-\" " + hex + "{4} \"-\" " + hex + "{4} \"-\" " + hex + "{12}"},
        {"email", atom + " (\".\" " + atom + "){0,3} \"@\" " + label + " (\".\" " + label + "){1,3}"},
        {"ipv4", octet + " \".\" " + octet + " \".\" " + octet + " \".\" " + octet},
    };
  }();
  auto it = formats.find(f);
  return it == formats.end() ? nullptr : it->second.c_str();
}

// One code point as a GBNF escape (inside a class or a literal).
std::string cp_escape(uint32_t cp) {
  char buf[16];
  if (cp < 0x80)
    std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned>(cp));
  else if (cp <= 0xFFFF)
    std::snprintf(buf, sizeof buf, "\\u%04X", static_cast<unsigned>(cp));
  else
    std::snprintf(buf, sizeof buf, "\\U%08X", static_cast<unsigned>(cp));
  return buf;
}

std::string json_literal(const json& v) {
  return literal(v.dump(-1, ' ', false, json::error_handler_t::replace));
}

class Converter {
 public:
  Converter(const json& root, std::string prefix) : root_(root), prefix_(std::move(prefix)) {}

  // The expression for the root schema; its rules are then in rules().
  Result<std::string> run() { return visit(root_, ""); }
  std::string rules() const {
    std::string out;
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

 private:
  const json& root_;
  const std::string prefix_;  // of the rules' names
  std::vector<std::pair<std::string, std::string>> rules_;
  std::map<std::string, std::string> refs_;  // "$ref" -> its rule
  int next_ = 0;

  std::string add_rule(std::string body) {
    std::string name = prefix_ + std::to_string(next_++);
    rules_.emplace_back(name, std::move(body));
    return name;
  }

  static Status check_keywords(const json& s, const std::string& path) {
    static const std::set<std::string> known = {"type",
                                                "properties",
                                                "required",
                                                "additionalProperties",
                                                "items",
                                                "minItems",
                                                "maxItems",
                                                "minLength",
                                                "maxLength",
                                                "enum",
                                                "const",
                                                "anyOf",
                                                "oneOf",
                                                "allOf",
                                                "$ref",
                                                "$defs",
                                                "definitions",
                                                "title",
                                                "description",
                                                "default",
                                                "examples",
                                                "$schema",
                                                "$id",
                                                "$comment",
                                                "deprecated",
                                                "readOnly",
                                                "writeOnly",
                                                "minimum",
                                                "maximum",
                                                "exclusiveMinimum",
                                                "exclusiveMaximum",
                                                "pattern",
                                                "format",
                                                "prefixItems",
                                                "minProperties",
                                                "maxProperties"};
    for (const auto& [key, v] : s.items())
      if (!known.count(key))
        return err("JSON Schema keyword '%s' at %s is not supported", key.c_str(),
                   path.empty() ? "/" : path.c_str());
    return {};
  }

  static Result<int64_t> count(const json& s, const char* key, const std::string& path, int64_t dflt) {
    auto it = s.find(key);
    if (it == s.end()) return dflt;
    if (!it->is_number_integer() || it->get<int64_t>() < 0)
      return err("JSON Schema '%s' at %s must be a non-negative integer", key,
                 path.empty() ? "/" : path.c_str());
    return it->get<int64_t>();
  }

  Result<std::string> visit(const json& s, const std::string& path) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return std::string("value");
      return err("JSON Schema at %s is false: nothing matches it", path.empty() ? "/" : path.c_str());
    }
    if (!s.is_object()) return err("JSON Schema at %s must be an object", path.empty() ? "/" : path.c_str());
    STRATA_TRY(check_keywords(s, path));
    if (auto it = s.find("$ref"); it != s.end()) return ref(*it, path);
    if (auto it = s.find("const"); it != s.end()) return json_literal(*it);
    if (auto it = s.find("enum"); it != s.end()) {
      if (!it->is_array() || it->empty())
        return err("JSON Schema 'enum' at %s must be a non-empty array", where(path));
      std::string alt;
      for (const json& v : *it) alt += (alt.empty() ? "" : " | ") + json_literal(v);
      return add_rule(alt);
    }
    for (const char* key : {"anyOf", "oneOf", "allOf"}) {
      auto it = s.find(key);
      if (it == s.end()) continue;
      if (!it->is_array() || it->empty())
        return err("JSON Schema '%s' at %s must be a non-empty array", key, where(path));
      if (std::string(key) == "allOf" && it->size() != 1)
        return err("JSON Schema 'allOf' at %s with more than one schema is not supported", where(path));
      std::string alt;
      for (size_t i = 0; i < it->size(); ++i) {
        STRATA_ASSIGN(std::string e, visit((*it)[i], path + "/" + key + "/" + std::to_string(i)));
        alt += (alt.empty() ? "" : " | ") + e;
      }
      return add_rule(alt);
    }
    auto t = s.find("type");
    if (t != s.end() && t->is_array()) {
      std::string alt;
      for (const json& name : *t) {
        json one = s;
        one["type"] = name;
        STRATA_ASSIGN(std::string e, visit(one, path));
        alt += (alt.empty() ? "" : " | ") + e;
      }
      if (alt.empty()) return err("JSON Schema 'type' at %s is an empty array", where(path));
      return add_rule(alt);
    }
    std::string type;
    if (t != s.end()) {
      if (!t->is_string()) return err("JSON Schema 'type' at %s must be a string or an array", where(path));
      type = t->get<std::string>();
    } else if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) {
      type = "object";
    } else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") ||
               s.contains("maxItems")) {
      type = "array";
    } else if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern") ||
               s.contains("format")) {
      type = "string";
    } else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
               s.contains("exclusiveMaximum")) {
      type = "number";
    }
    if (type.empty()) return std::string("value");
    if (type == "object") return object(s, path);
    if (type == "array") return array(s, path);
    if (type == "string") return string(s, path);
    if (type == "number" || type == "integer") return number(s, path, type == "integer");
    if (type == "boolean" || type == "null") return type;
    return err("JSON Schema 'type' at %s: unknown type '%s'", where(path), type.c_str());
  }

  static const char* where(const std::string& path) { return path.empty() ? "/" : path.c_str(); }

  Result<std::string> ref(const json& r, const std::string& path) {
    if (!r.is_string()) return err("JSON Schema '$ref' at %s must be a string", where(path));
    const std::string target = r.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    std::string key;
    for (const char* prefix : {"#/$defs/", "#/definitions/"})
      if (target.rfind(prefix, 0) == 0) key = std::string(prefix).substr(2, std::string(prefix).size() - 3);
    const std::string name_in = key.empty() ? "" : target.substr(key.size() + 3);
    auto defs = key.empty() ? root_.end() : root_.find(key);
    if (defs == root_.end() || !defs->is_object() || !defs->contains(name_in))
      return err("JSON Schema '$ref' at %s: \"%s\" is not a #/$defs/ or #/definitions/ entry of this schema",
                 where(path), target.c_str());
    const std::string name = prefix_ + std::to_string(next_++);
    refs_[target] = name;  // before visiting: a recursive schema refers to itself by name
    STRATA_ASSIGN(std::string body, visit((*defs)[name_in], "/" + key + "/" + name_in));
    rules_.emplace_back(name, body);
    return name;
  }

  Result<std::string> string(const json& s, const std::string& path) {
    STRATA_ASSIGN(int64_t lo, count(s, "minLength", path, 0));
    STRATA_ASSIGN(int64_t hi, count(s, "maxLength", path, -1));
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    if (auto it = s.find("pattern"); it != s.end()) {
      if (!it->is_string()) return err("JSON Schema 'pattern' at %s must be a string", where(path));
      if (lengths || s.contains("format"))
        return err("JSON Schema 'pattern' at %s with minLength, maxLength or format is not supported",
                   where(path));
      auto g = pattern_to_grammar(it->get<std::string>());
      if (!g.ok()) return err("JSON Schema 'pattern' at %s: %s", where(path), g.message().c_str());
      return add_rule(*g);
    }
    if (auto it = s.find("format"); it != s.end()) {
      if (!it->is_string()) return err("JSON Schema 'format' at %s must be a string", where(path));
      if (lengths)
        return err("JSON Schema 'format' at %s with minLength or maxLength is not supported", where(path));
      const std::string f = it->get<std::string>();
      const char* g = string_format(f);
      if (g == nullptr)
        return err(
            "JSON Schema 'format' at %s: '%s' is not supported (date, time, date-time, uuid, email, ipv4 "
            "are)",
            where(path), f.c_str());
      return add_rule(std::string("\"\\\"\" ") + g + " \"\\\"\"");
    }
    if (lo == 0 && hi < 0) return std::string("string");
    if (hi >= 0 && hi < lo) return err("JSON Schema at %s: maxLength < minLength", where(path));
    return add_rule("\"\\\"\" char{" + std::to_string(lo) + "," + (hi >= 0 ? std::to_string(hi) : "") +
                    "} \"\\\"\"");
  }

  // A bound of a number: an integer value (for integers, a fractional bound is rounded inward).
  static Result<std::optional<int64_t>> bound(const json& s, const char* key, const std::string& path,
                                              bool integer, bool upper) {
    auto it = s.find(key);
    if (it == s.end()) return std::optional<int64_t>();
    if (!it->is_number())
      return err("JSON Schema '%s' at %s must be a number (the draft-4 boolean form is not supported)", key,
                 where(path));
    double v = it->get<double>();
    if (integer) v = upper ? std::floor(v) : std::ceil(v);
    if (v != std::floor(v))
      return err("JSON Schema '%s' at %s: only integer bounds are supported for numbers", key, where(path));
    if (!(std::fabs(v) < 9.0e15))
      return err("JSON Schema '%s' at %s: bounds beyond +-9e15 are not supported", key, where(path));
    return std::optional<int64_t>(static_cast<int64_t>(v));
  }

  Result<std::string> number(const json& s, const std::string& path, bool integer) {
    STRATA_ASSIGN(std::optional<int64_t> min, bound(s, "minimum", path, integer, false));
    STRATA_ASSIGN(std::optional<int64_t> max, bound(s, "maximum", path, integer, true));
    STRATA_ASSIGN(std::optional<int64_t> xmin, bound(s, "exclusiveMinimum", path, integer, false));
    STRATA_ASSIGN(std::optional<int64_t> xmax, bound(s, "exclusiveMaximum", path, integer, true));
    if (!min && !max && !xmin && !xmax) return std::string(integer ? "integer" : "number");
    if (integer) {
      // An exclusive bound x is the inclusive x + 1 (x - 1); rounding moved fractional ones inward.
      auto excl = [&](const char* key, bool upper) {
        const double v = s[key].get<double>();
        return (upper ? std::floor(v) : std::ceil(v)) == v;
      };
      std::optional<int64_t> lo = min, hi = max;
      if (xmin) lo = std::max(lo.value_or(INT64_MIN), *xmin + (excl("exclusiveMinimum", false) ? 1 : 0));
      if (xmax) hi = std::min(hi.value_or(INT64_MAX), *xmax - (excl("exclusiveMaximum", true) ? 1 : 0));
      const std::string g = integer_range_grammar(lo, hi);
      if (g.empty()) return err("JSON Schema at %s: no integer is within the bounds", where(path));
      return add_rule(g);
    }
    // The tighter of the inclusive and exclusive bound on each side.
    const bool lo_excl = xmin && (!min || *xmin >= *min);
    const bool hi_excl = xmax && (!max || *xmax <= *max);
    const std::optional<int64_t> lo = lo_excl ? xmin : min, hi = hi_excl ? xmax : max;
    const std::string g = number_range_grammar(lo, lo_excl, hi, hi_excl);
    if (g.empty()) return err("JSON Schema at %s: no number is within the bounds", where(path));
    return add_rule(g);
  }

  Result<std::string> array(const json& s, const std::string& path) {
    std::string item = "value";
    if (auto it = s.find("items"); it != s.end() && !(*it == json(false) && s.contains("prefixItems"))) {
      STRATA_ASSIGN(item, visit(*it, path + "/items"));
    }
    STRATA_ASSIGN(int64_t lo, count(s, "minItems", path, 0));
    STRATA_ASSIGN(int64_t hi, count(s, "maxItems", path, -1));
    if (hi >= 0 && hi < lo) return err("JSON Schema at %s: maxItems < minItems", where(path));
    if (auto it = s.find("prefixItems"); it != s.end()) return tuple(s, *it, item, lo, hi, path);
    if (hi == 0) return add_rule("\"[\" ws \"]\"");
    const std::string more = "(\",\" ws " + item + " ws)";
    const std::string rest_hi = hi < 0 ? "" : std::to_string(hi - 1);
    const std::string list =
        item + " ws " + more + "{" + std::to_string(lo > 0 ? lo - 1 : 0) + "," + rest_hi + "}";
    return add_rule("\"[\" ws " + (lo > 0 ? list : "(" + list + ")?") + " \"]\"");
  }

  // prefixItems: the first items each their own schema, then `items` (false: none); an array may
  // stop before the prefix ends (as JSON Schema allows) once minItems are there.
  Result<std::string> tuple(const json& s, const json& prefix, const std::string& item, int64_t lo,
                            int64_t hi, const std::string& path) {
    if (!prefix.is_array()) return err("JSON Schema 'prefixItems' at %s must be an array", where(path));
    const auto items = s.find("items");
    const bool more = items == s.end() || !items->is_boolean() || items->get<bool>();
    int64_t n = static_cast<int64_t>(prefix.size());
    if (hi >= 0) n = std::min(n, hi);
    if (!more && lo > n)
      return err("JSON Schema at %s: minItems is more than prefixItems and items is false", where(path));
    std::string next;  // what follows the first n items
    if (more && (hi < 0 || hi > n)) {
      const std::string rest_lo = std::to_string(std::max<int64_t>(lo - n, 0));
      const std::string rest_hi = hi < 0 ? "" : std::to_string(hi - n);
      next = "(\",\" ws " + item + " ws){" + rest_lo + "," + rest_hi + "}";
    }
    for (int64_t i = n; i-- > 0;) {
      STRATA_ASSIGN(std::string e,
                    visit(prefix[static_cast<size_t>(i)], path + "/prefixItems/" + std::to_string(i)));
      std::string seq = (i == 0 ? "" : "\",\" ws ") + e + " ws" + (next.empty() ? "" : " " + next);
      next = i >= lo ? "(" + seq + ")?" : seq;
    }
    return add_rule("\"[\" ws " + (next.empty() ? "" : next + " ") + "\"]\"");
  }

  // The characters of a key (between its quotes) that is none of `names`: a trie of their code
  // points, each node allowing the end (when no name ends there), a character none of its children
  // has, or a child; past a name's last character, at least one more.
  std::string other_key(const std::set<std::string>& names) {
    struct Node {
      std::map<uint32_t, int> next;
      bool end = false;
    };
    std::vector<Node> trie(1);
    for (const std::string& n : names) {
      int at = 0;
      for (uint32_t cp : text::utf8_decode(n)) {
        auto it = trie[static_cast<size_t>(at)].next.find(cp);
        if (it == trie[static_cast<size_t>(at)].next.end()) {
          trie.emplace_back();
          it = trie[static_cast<size_t>(at)].next.emplace(cp, static_cast<int>(trie.size()) - 1).first;
        }
        at = it->second;
      }
      trie[static_cast<size_t>(at)].end = true;
    }
    const std::string keychar = add_rule("[^\"\\\\\\x00-\\x1F]");
    std::function<std::string(int)> node = [&](int at) -> std::string {
      const Node& nd = trie[static_cast<size_t>(at)];
      std::string cls = "[^\"\\\\\\x00-\\x1F";
      for (const auto& [cp, child] : nd.next) cls += cp_escape(cp);
      std::string alt = cls + "] " + keychar + "*";
      if (!nd.end) alt += " | \"\"";
      for (const auto& [cp, child] : nd.next) alt += " | \"" + cp_escape(cp) + "\" " + node(child);
      return add_rule(alt);
    };
    return node(0);
  }

  // An object of the listed properties (kvs: key-value rule, required) in order, with between lo
  // and hi of them (hi < 0: no bound). Rule (k, c): the properties from k on with c written before
  // (c counted up to max(lo, 1), or hi); only the (k, c) that can still end within the bounds.
  Result<std::string> counted_object(const std::vector<std::pair<std::string, bool>>& kvs, int64_t lo,
                                     int64_t hi, const std::string& path) {
    const int64_t n = static_cast<int64_t>(kvs.size());
    std::vector<int64_t> req_from(kvs.size() + 1, 0);
    for (int64_t k = n; k-- > 0;) req_from[k] = req_from[k + 1] + (kvs[k].second ? 1 : 0);
    const int64_t cap = hi >= 0 ? hi : std::max<int64_t>(lo, 1);
    auto feasible = [&](int64_t k, int64_t c) {
      return c + (n - k) >= lo && (hi < 0 || c + req_from[k] <= hi);
    };
    if (!feasible(0, 0))
      return err(
          "JSON Schema at %s: no object of the listed properties has minProperties..maxProperties of them",
          where(path));
    std::map<std::pair<int64_t, int64_t>, std::string> memo;
    std::function<std::string(int64_t, int64_t)> rule = [&](int64_t k, int64_t c) -> std::string {
      if (k == n) return "\"\"";
      auto it = memo.find({k, c});
      if (it != memo.end()) return it->second;
      std::string alt;
      if ((hi < 0 || c < hi) && feasible(k + 1, c + 1))
        alt = (c > 0 ? "\",\" ws " : "") + kvs[k].first + " " + rule(k + 1, std::min(c + 1, cap));
      if (!kvs[k].second && feasible(k + 1, c)) alt += (alt.empty() ? "" : " | ") + rule(k + 1, c);
      return memo[{k, c}] = add_rule(alt);
    };
    return add_rule("\"{\" ws " + rule(0, 0) + " \"}\"");
  }

  Result<std::string> object(const json& s, const std::string& path) {
    const json* props = nullptr;
    if (auto it = s.find("properties"); it != s.end()) {
      if (!it->is_object()) return err("JSON Schema 'properties' at %s must be an object", where(path));
      props = &*it;
    }
    std::set<std::string> required;
    if (auto it = s.find("required"); it != s.end()) {
      if (!it->is_array()) return err("JSON Schema 'required' at %s must be an array of names", where(path));
      for (const json& n : *it) {
        if (!n.is_string()) return err("JSON Schema 'required' at %s must be an array of names", where(path));
        required.insert(n.get<std::string>());
      }
    }
    bool closed = false;
    std::string other;  // an additionalProperties schema's value rule ("" for true / false)
    if (auto it = s.find("additionalProperties"); it != s.end()) {
      if (it->is_boolean()) {
        closed = !it->get<bool>();
      } else if (it->is_object()) {
        STRATA_ASSIGN(other, visit(*it, path + "/additionalProperties"));
      } else {
        return err("JSON Schema 'additionalProperties' at %s must be a boolean or a schema", where(path));
      }
    }
    // (key-value rule, required) in order: the listed properties, then required names not listed
    // (their values under the additionalProperties schema when there is one).
    std::vector<std::pair<std::string, bool>> kvs;
    std::set<std::string> listed;
    if (props)
      for (const auto& [name, sub] : props->items()) {
        STRATA_ASSIGN(std::string v, visit(sub, path + "/properties/" + name));
        kvs.emplace_back(add_rule(json_literal(json(name)) + " ws \":\" ws " + v + " ws"),
                         required.count(name) > 0);
        listed.insert(name);
      }
    for (const std::string& name : required)
      if (!listed.count(name)) {
        kvs.emplace_back(
            add_rule(json_literal(json(name)) + " ws \":\" ws " + (other.empty() ? "value" : other) + " ws"),
            true);
        listed.insert(name);
      }
    // Additional properties after the listed ones: keys other than theirs (plain characters, no
    // escapes, so that no key spells a listed one another way), values under the schema.
    std::string extra_first, extra_after;  // the tail with nothing / something written before it
    if (!other.empty()) {
      const std::string kv =
          add_rule("\"\\\"\" " + other_key(listed) + " \"\\\"\" ws \":\" ws " + other + " ws");
      extra_after = add_rule("(\",\" ws " + kv + ")*");
      extra_first = add_rule("(" + kv + " " + extra_after + ")?");
    }
    STRATA_ASSIGN(int64_t min_props, count(s, "minProperties", path, 0));
    STRATA_ASSIGN(int64_t max_props, count(s, "maxProperties", path, -1));
    if (max_props >= 0 && max_props < min_props)
      return err("JSON Schema at %s: maxProperties < minProperties", where(path));
    if (min_props > 0 || max_props >= 0) {
      if (!other.empty())
        return err(
            "JSON Schema 'minProperties' / 'maxProperties' at %s with an additionalProperties schema is "
            "not supported",
            where(path));
      if (kvs.empty())
        return err("JSON Schema 'minProperties' / 'maxProperties' at %s need listed properties", where(path));
      return counted_object(kvs, min_props, max_props, path);
    }
    if (kvs.empty() && !other.empty()) return add_rule("\"{\" ws " + extra_first + " \"}\"");
    if (kvs.empty()) return closed ? add_rule("\"{\" ws \"}\"") : std::string("object");
    // first[k] / after[k]: the properties from k on, with none / some written before them.
    std::string first_next = extra_first, after_next = extra_after;  // for k + 1 ("": the end)
    for (size_t k = kvs.size(); k-- > 0;) {
      const auto& [kv, req] = kvs[k];
      const std::string after_body = "\",\" ws " + kv + (after_next.empty() ? "" : " " + after_next);
      const std::string first_body = kv + (after_next.empty() ? "" : " " + after_next);
      std::string after =
          req ? after_body : after_body + (after_next.empty() ? " | \"\"" : " | " + after_next);
      std::string first =
          req ? first_body : first_body + (first_next.empty() ? " | \"\"" : " | " + first_next);
      after_next = add_rule(after);
      first_next = add_rule(first);
    }
    return add_rule("\"{\" ws " + first_next + " \"}\"");
  }
};

}  // namespace

Result<std::string> json_schema_to_grammar(const json& schema) {
  Converter c(schema, "r");
  STRATA_ASSIGN(std::string top, c.run());
  return "root ::= " + top + "\n" + kPrimitives + c.rules();
}

Result<std::string> json_schema_part(const json& schema, const std::string& prefix, std::string* rules) {
  Converter c(schema, prefix);
  STRATA_ASSIGN(std::string top, c.run());
  *rules += c.rules();
  return top;
}

std::string gbnf_literal(const std::string& text) {
  return literal(text);
}

const char* json_grammar_primitives() {
  return kPrimitives;
}

Result<std::string> tool_call_grammar(const std::vector<ToolFunction>& fns, const std::string& root_rule) {
  std::string root, rules;
  for (size_t i = 0; i < fns.size(); ++i) {
    auto args = json_schema_part(fns[i].parameters, "f" + std::to_string(i) + "-", &rules);
    if (!args.ok()) return err("tool '%s' parameters: %s", fns[i].name.c_str(), args.message().c_str());
    root += (root.empty() ? "" : " | ") + std::string("\"{\" ws \"\\\"name\\\"\" ws \":\" ws ") +
            json_literal(json(fns[i].name)) + " ws \",\" ws \"\\\"arguments\\\"\" ws \":\" ws " + *args +
            " ws \"}\"";
  }
  return root_rule + " ::= " + root + "\n" + kPrimitives + rules;
}

std::string json_object_grammar() {
  return std::string("root ::= object\n") + kPrimitives;
}

}  // namespace strata::server
