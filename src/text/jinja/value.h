// The values a Jinja template computes with: undefined, none, booleans, integers, floats, strings,
// lists (tuples are lists marked as such), dicts (keys in insertion order, as Python's and as
// @huggingface/jinja's), and functions (built-ins, macros, bound methods). Lists and dicts are
// shared by reference, as in Python: `ns.x = ..` on a namespace() and `list.append` change the one
// object every name for it sees.
//
// Printing follows @huggingface/jinja (the reference strata's renderings are compared with):
// booleans print as "true" / "false", none and undefined as "", lists and dicts as JSON.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace strata::jinja {

struct Value;
struct Dict;
// A list's items. Lists and dicts free their items without recursing (a template can nest them a
// million deep, or in a cycle through namespaces): what they hold is released by a loop.
struct List : std::vector<Value> {
  using std::vector<Value>::vector;
  List() = default;
  List(const List&) = default;
  List(List&&) = default;
  List& operator=(const List&) = default;
  List& operator=(List&&) = default;
  ~List();
};

// A call's arguments: positional, then keyword in the order written.
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  const Value* get(size_t index, std::string_view name) const;  // positional `index`, else keyword `name`
};
using NativeFn = std::function<Result<Value>(CallArgs& args)>;

struct Value {
  enum class Kind : uint8_t { undefined, none, boolean, integer, floating, string, list, dict, function };
  Kind kind = Kind::undefined;
  bool tuple = false;  // a list written as a tuple (prints the same; kept for `is sequence` and tojson)
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;
  std::shared_ptr<const NativeFn> fn;
  std::string fn_name;  // a function's name for errors

  static Value none() { return with(Kind::none); }
  static Value boolean(bool v) {
    Value x = with(Kind::boolean);
    x.b = v;
    return x;
  }
  static Value integer(int64_t v) {
    Value x = with(Kind::integer);
    x.i = v;
    return x;
  }
  static Value floating(double v) {
    Value x = with(Kind::floating);
    x.f = v;
    return x;
  }
  static Value str(std::string v) {
    Value x = with(Kind::string);
    x.s = std::move(v);
    return x;
  }
  static Value new_list(List items = {});
  static Value new_dict();
  static Value function(std::string name, NativeFn fn);

  bool is_undefined() const { return kind == Kind::undefined; }
  bool is_none() const { return kind == Kind::none; }
  bool is_string() const { return kind == Kind::string; }
  bool is_list() const { return kind == Kind::list; }
  bool is_dict() const { return kind == Kind::dict; }
  bool is_number() const { return kind == Kind::integer || kind == Kind::floating; }
  double as_double() const {
    return kind == Kind::floating ? f : static_cast<double>(kind == Kind::boolean ? b : i);
  }

 private:
  static Value with(Kind k) {
    Value x;
    x.kind = k;
    return x;
  }
};

struct Dict {
  Dict() = default;
  Dict(const Dict&) = default;
  Dict(Dict&&) = default;
  Dict& operator=(const Dict&) = default;
  Dict& operator=(Dict&&) = default;
  ~Dict();
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;
  // A dict literal with integer keys ({4096: 512}): keys are kept as their decimal text and read
  // back as integers (items, keys, iteration, dictsort).
  bool int_keys = false;
  Value key(const std::string& k) const;
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  void set(const std::string& key, Value v);
  bool erase(std::string_view key);
};

// While one is alive on a thread, every list and dict made there is tracked; when it ends, those
// still alive (held only by cycles a template made, `{% set ns.me = ns %}`) are emptied, so a
// render leaks nothing. One per render (Template::render), made before its values.
class ContainerArena {
 public:
  ContainerArena();
  ~ContainerArena();
  ContainerArena(const ContainerArena&) = delete;
  ContainerArena& operator=(const ContainerArena&) = delete;
  // Lists and dicts alive in this process (for tests).
  static int64_t live();

 private:
  bool owner_ = false;
};

const char* kind_name(const Value& v);  // "string", "list", ... for errors
bool truthy(const Value& v);
// `{{ v }}` and the `string` filter: as @huggingface/jinja prints it.
std::string to_str(const Value& v);
// Values nested deeper than 256 (or in a cycle) compare unequal / are an error.
bool equal(const Value& a, const Value& b, int depth = 0);
// <0, 0, >0; an error for values that do not order (a string and a number, ...).
Result<int> compare(const Value& a, const Value& b, int depth = 0);

struct JsonStyle {
  int indent = -1;  // < 0: one line
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::optional<std::string> item_sep;  // absent: ", " on one line, "," when indented
  std::string key_sep = ": ";
};
// The `tojson` filter as @huggingface/jinja writes it (undefined is null; functions are an error).
Result<std::string> to_json(const Value& v, const JsonStyle& style = {});
// A string as JSON writes it ("..." with \" \\ \n \uXXXX escapes; non-ASCII kept unless ensure_ascii).
std::string json_quote(std::string_view s, bool ensure_ascii = false);
// Template input: JSON values as Jinja values (whole numbers are integers, as in JavaScript); an
// error for input nested deeper than 512.
Result<Value> from_json(const nlohmann::ordered_json& j, int depth = 0);

// String helpers the filters and methods share: ASCII case (as JavaScript's for ASCII text),
// Python's whitespace, strip with optional characters (`chars`: a string value, else whitespace).
std::string ascii_lower(std::string s);
std::string ascii_upper(std::string s);
bool is_space(char c);
std::string strip_chars(const std::string& s, const Value* chars, bool left, bool right);

// Python's float repr as @huggingface/jinja prints floats ("1.0", "0.5", "1e-07").
std::string float_str(double d);

}  // namespace strata::jinja
