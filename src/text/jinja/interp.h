// The Jinja evaluator: runs a parsed template's statements over a context, with limits for
// untrusted templates (output bytes, steps, macro call depth). Filters, tests, global functions
// (filters.cpp, tests.cpp, globals.cpp) and the methods of strings, lists and dicts (methods.cpp) are
// declared here.
#pragma once

#include <string>
#include <unordered_map>

#include "text/jinja/ast.h"

namespace strata::jinja {

struct Limits {
  size_t max_output = size_t{64} << 20;  // bytes a render may write
  uint64_t max_steps = 20'000'000;       // statements, loop iterations and calls
  int max_call_depth = 100;              // nested macro calls
};

struct Scope {
  std::unordered_map<std::string, Value> vars;
  Scope* parent = nullptr;
  const Value* find(const std::string& name) const;
};

class Interp {
 public:
  Interp(const Limits& limits, Scope* root) : limits_(limits), root_(root) {}

  Status exec(const Body& body, Scope& scope, std::string* out);
  Result<Value> eval(const Expr& e, Scope& scope);
  // Counts one step against Limits::max_steps.
  Status step();
  const Limits& limits() const { return limits_; }

 private:
  enum class Flow : uint8_t { normal, break_, continue_ };
  Status exec_stmt(const Stmt& s, Scope& scope, std::string* out);
  Status exec_for(const Stmt& s, Scope& scope, std::string* out);
  Status exec_set(const Stmt& s, Scope& scope);
  Value make_macro(const Stmt& s);
  Result<Value> eval_binary(const Expr& e, Scope& scope);
  Result<Value> eval_call(const Expr& e, Scope& scope);
  Result<CallArgs> eval_args(const Expr& e, size_t first, Scope& scope);
  Result<Value> eval_attr(const Value& obj, const std::string& name);

  const Limits& limits_;
  Scope* root_;
  Flow flow_ = Flow::normal;
  uint64_t steps_ = 0;
  int call_depth_ = 0;
};

// Errors here carry no position: the evaluator adds the expression's.
Result<Value> apply_filter(Interp& in, const std::string& name, const Value& v, CallArgs& args);
Result<bool> apply_test(const std::string& name, const Value& v, CallArgs& args);
// range, namespace, dict, raise_exception, strftime_now (nullptr for another name).
const Value* global_function(const std::string& name);
// A method of a string, list or dict bound to `obj` (undefined when it has none of that name).
Value bound_method(const Value& obj, const std::string& name);

// Helpers shared by the builtins.
Value get_attr(const Value& obj, std::string_view name);  // a dict's key, else undefined
Result<List> iterate(const Value& v);                     // the items a for loop / filter sees
std::vector<std::string> utf8_chars(const std::string& s);

}  // namespace strata::jinja
