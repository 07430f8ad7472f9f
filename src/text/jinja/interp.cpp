// The Jinja evaluator: statements (text, output, if, for, set, macro, call and filter blocks,
// break / continue) and expressions. Errors name the line and column of the expression or
// statement that failed.
#include "text/jinja/interp.h"

#include <cmath>

namespace strata::jinja {
namespace {

Error at(Pos p, const std::string& msg) {
  // An error already carrying a position (from a nested macro or expression) keeps it.
  if (msg.starts_with("line ")) return Error{msg};
  return Error{pos_prefix(p) + msg};
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

Result<bool> contains(const Value& hay, const Value& needle) {
  if (hay.is_string()) {
    if (!needle.is_string())
      return err("'in <string>' needs a string on the left, got %s", kind_name(needle));
    return hay.s.find(needle.s) != std::string::npos;
  }
  if (hay.is_list()) {
    for (const Value& x : *hay.list)
      if (equal(x, needle)) return true;
    return false;
  }
  if (hay.is_dict()) return needle.is_string() && hay.dict->find(needle.s) != nullptr;
  if (hay.is_undefined() || hay.is_none()) return false;
  return err("'in' needs a string, list or dict on the right, got %s", kind_name(hay));
}

Result<Value> arith(const std::string& op, const Value& l, const Value& r) {
  const bool nums =
      (l.is_number() || l.kind == Value::Kind::boolean) && (r.is_number() || r.kind == Value::Kind::boolean);
  if (op == "+") {
    if (l.is_string() && r.is_string()) return Value::str(l.s + r.s);
    if (l.is_list() && r.is_list()) {
      List out = *l.list;
      out.insert(out.end(), r.list->begin(), r.list->end());
      return Value::new_list(std::move(out));
    }
    // @huggingface/jinja joins a string with anything as text.
    if (l.is_string() || r.is_string()) return Value::str(to_str(l) + to_str(r));
  }
  if (op == "*" && (l.is_string() || r.is_string())) {
    const Value& s = l.is_string() ? l : r;
    const Value& n = l.is_string() ? r : l;
    if (n.kind != Value::Kind::integer)
      return err("a string can only be repeated an integer number of times");
    if (n.i > 0 && s.s.size() * static_cast<size_t>(n.i) > (size_t{64} << 20))
      return err("string repetition longer than 64 MiB");
    std::string out;
    for (int64_t k = 0; k < n.i; ++k) out += s.s;
    return Value::str(std::move(out));
  }
  if (!nums)
    return err("unsupported operand types for %s: %s and %s", op.c_str(), kind_name(l), kind_name(r));
  const bool ints = l.kind != Value::Kind::floating && r.kind != Value::Kind::floating;
  const int64_t a = l.kind == Value::Kind::boolean ? l.b : l.i,
                b = r.kind == Value::Kind::boolean ? r.b : r.i;
  const double x = l.as_double(), y = r.as_double();
  if (op == "+") return ints ? Value::integer(a + b) : Value::floating(x + y);
  if (op == "-") return ints ? Value::integer(a - b) : Value::floating(x - y);
  if (op == "*") return ints ? Value::integer(a * b) : Value::floating(x * y);
  if (op == "/") {
    if (y == 0) return err("division by zero");
    return Value::floating(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) return err("%s by zero", op == "//" ? "integer division" : "modulo");
    if (ints) return op == "//" ? Value::integer(floor_div(a, b)) : Value::integer(a - floor_div(a, b) * b);
    const double q = std::floor(x / y);
    return op == "//" ? Value::floating(q) : Value::floating(x - q * y);
  }
  if (op == "**") {
    if (ints && b >= 0) {
      int64_t p = 1;
      for (int64_t k = 0; k < b && k < 64; ++k) p *= a;
      return Value::integer(p);
    }
    return Value::floating(std::pow(x, y));
  }
  return err("unknown operator %s", op.c_str());
}

}  // namespace

const Value* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return &it->second;
  }
  return nullptr;
}

Status Interp::step() {
  if (++steps_ > limits_.max_steps)
    return err("the template ran more than %llu steps (a loop that does not end?)",
               static_cast<unsigned long long>(limits_.max_steps));
  return {};
}

Status Interp::exec(const Body& body, Scope& scope, std::string* out) {
  for (const auto& s : body) {
    STRATA_TRY(exec_stmt(*s, scope, out));
    if (out->size() > limits_.max_output)
      return at(s->pos, "the output is larger than " + std::to_string(limits_.max_output) + " bytes");
    if (flow_ != Flow::normal) return {};
  }
  return {};
}

Status Interp::exec_stmt(const Stmt& s, Scope& scope, std::string* out) {
  if (auto st = step(); !st.ok()) return at(s.pos, st.message());
  switch (s.kind) {
    case StmtKind::text:
      *out += s.text;
      return {};
    case StmtKind::output: {
      STRATA_ASSIGN(Value v, eval(*s.expr, scope));
      *out += to_str(v);
      return {};
    }
    case StmtKind::if_:
      for (size_t k = 0; k < s.conds.size(); ++k) {
        STRATA_ASSIGN(Value c, eval(*s.conds[k], scope));
        if (truthy(c)) return exec(s.bodies[k], scope, out);
      }
      if (s.bodies.size() > s.conds.size()) return exec(s.bodies.back(), scope, out);
      return {};
    case StmtKind::for_:
      return exec_for(s, scope, out);
    case StmtKind::set:
      return exec_set(s, scope);
    case StmtKind::macro:
      scope.vars[s.text] = make_macro(s);
      return {};
    case StmtKind::call_block: {
      // caller() renders the block in the scope of the call, while that scope lives (a caller kept
      // in a namespace and called later is an error, not a dangling scope).
      const Stmt* blk = &s;
      Scope* where = &scope;
      auto alive = std::make_shared<bool>(true);
      struct Expire {
        std::shared_ptr<bool> flag;
        ~Expire() { *flag = false; }
      } expire{alive};
      Value caller = Value::function("caller", [this, blk, where, alive](CallArgs&) -> Result<Value> {
        if (!*alive) return err("caller() called after its {%% call %%} block ended");
        Scope inner{{}, where};
        std::string text;
        STRATA_TRY(exec(blk->bodies[0], inner, &text));
        return Value::str(std::move(text));
      });
      const Expr& call = *s.expr;
      STRATA_ASSIGN(Value fn, eval(*call.kids[0], scope));
      if (fn.kind != Value::Kind::function)
        return at(call.pos, "{% call %} of something that is not a macro");
      STRATA_ASSIGN(CallArgs args, eval_args(call, 1, scope));
      args.kw.emplace_back("caller", std::move(caller));
      auto r = (*fn.fn)(args);
      if (!r.ok()) return at(call.pos, r.message());
      *out += to_str(*r);
      return {};
    }
    case StmtKind::filter_block: {
      std::string text;
      STRATA_TRY(exec(s.bodies[0], scope, &text));
      Scope inner{{}, &scope};
      inner.vars[kBlockInput] = Value::str(std::move(text));
      STRATA_ASSIGN(Value v, eval(*s.expr, inner));
      *out += to_str(v);
      return {};
    }
    case StmtKind::break_:
      flow_ = Flow::break_;
      return {};
    case StmtKind::continue_:
      flow_ = Flow::continue_;
      return {};
  }
  return {};
}

Status Interp::exec_for(const Stmt& s, Scope& scope, std::string* out) {
  STRATA_ASSIGN(Value seq, eval(*s.expr, scope));
  auto items_r = iterate(seq);
  if (!items_r.ok()) return at(s.expr->pos, "for: " + items_r.message());
  List items = std::move(*items_r);
  auto bind = [&](Scope& inner, const Value& item) -> Status {
    if (s.targets.size() == 1) {
      inner.vars[s.targets[0]] = item;
      return {};
    }
    if (!item.is_list() || item.list->size() != s.targets.size())
      return at(s.pos, "for: cannot unpack " + std::string(kind_name(item)) + " into " +
                           std::to_string(s.targets.size()) + " names");
    for (size_t k = 0; k < s.targets.size(); ++k) inner.vars[s.targets[k]] = (*item.list)[k];
    return {};
  };
  if (s.cond) {  // the loop filter: items it rejects are not iterations at all
    List kept;
    for (const Value& item : items) {
      Scope probe{{}, &scope};
      STRATA_TRY(bind(probe, item));
      STRATA_ASSIGN(Value c, eval(*s.cond, probe));
      if (truthy(c)) kept.push_back(item);
    }
    items = std::move(kept);
  }
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t k = 0; k < n; ++k) {
    if (auto st = step(); !st.ok()) return at(s.pos, st.message());
    Scope inner{{}, &scope};
    STRATA_TRY(bind(inner, items[static_cast<size_t>(k)]));
    Value loop = Value::new_dict();
    Dict& d = *loop.dict;
    d.set("index", Value::integer(k + 1));
    d.set("index0", Value::integer(k));
    d.set("revindex", Value::integer(n - k));
    d.set("revindex0", Value::integer(n - k - 1));
    d.set("first", Value::boolean(k == 0));
    d.set("last", Value::boolean(k == n - 1));
    d.set("length", Value::integer(n));
    d.set("previtem", k > 0 ? items[static_cast<size_t>(k - 1)] : Value());
    d.set("nextitem", k + 1 < n ? items[static_cast<size_t>(k + 1)] : Value());
    inner.vars["loop"] = std::move(loop);
    STRATA_TRY(exec(s.bodies[0], inner, out));
    if (flow_ == Flow::break_) {
      flow_ = Flow::normal;
      break;
    }
    flow_ = Flow::normal;
  }
  if (n == 0 && s.bodies.size() > 1) return exec(s.bodies[1], scope, out);
  return {};
}

Status Interp::exec_set(const Stmt& s, Scope& scope) {
  Value v;
  if (s.bodies.empty()) {
    STRATA_ASSIGN(v, eval(*s.expr, scope));
  } else {
    std::string text;
    STRATA_TRY(exec(s.bodies[0], scope, &text));
    v = Value::str(std::move(text));
    if (s.expr) {
      Scope inner{{}, &scope};
      inner.vars[kBlockInput] = std::move(v);
      STRATA_ASSIGN(v, eval(*s.expr, inner));
    }
  }
  if (!s.attr.empty()) {
    const Value* ns = scope.find(s.targets[0]);
    if (!ns || !ns->is_dict())
      return at(s.pos, "set " + s.targets[0] + "." + s.attr + ": " + s.targets[0] + " is not a namespace");
    ns->dict->set(s.attr, std::move(v));
    return {};
  }
  if (s.targets.size() == 1) {
    scope.vars[s.targets[0]] = std::move(v);
    return {};
  }
  if (!v.is_list() || v.list->size() != s.targets.size())
    return at(s.pos, "set: cannot unpack " + std::string(kind_name(v)) + " into " +
                         std::to_string(s.targets.size()) + " names");
  for (size_t k = 0; k < s.targets.size(); ++k) scope.vars[s.targets[k]] = (*v.list)[k];
  return {};
}

Value Interp::make_macro(const Stmt& s) {
  const Stmt* m = &s;
  return Value::function(s.text, [this, m](CallArgs& args) -> Result<Value> {
    if (call_depth_ >= limits_.max_call_depth)
      return at(m->pos,
                "macro " + m->text + ": calls nested deeper than " + std::to_string(limits_.max_call_depth));
    Scope inner{{}, root_};
    for (size_t k = 0; k < m->targets.size(); ++k) {
      const Value* given = args.get(k, m->targets[k]);
      if (given) {
        inner.vars[m->targets[k]] = *given;
      } else if (m->defaults[k]) {
        STRATA_ASSIGN(inner.vars[m->targets[k]], eval(*m->defaults[k], inner));
      } else {
        inner.vars[m->targets[k]] = Value();
      }
    }
    List varargs;
    for (size_t k = m->targets.size(); k < args.pos.size(); ++k) varargs.push_back(args.pos[k]);
    inner.vars["varargs"] = Value::new_list(std::move(varargs));
    Value kwargs = Value::new_dict();
    for (const auto& [name, v] : args.kw) {
      bool param = false;
      for (const auto& t : m->targets) param = param || t == name;
      if (name == "caller") {
        inner.vars["caller"] = v;
      } else if (!param) {
        kwargs.dict->set(name, v);
      }
    }
    inner.vars["kwargs"] = std::move(kwargs);
    ++call_depth_;
    std::string text;
    Status st = exec(m->bodies[0], inner, &text);
    --call_depth_;
    flow_ = Flow::normal;
    if (!st.ok()) return st.error();
    return Value::str(std::move(text));
  });
}

Result<CallArgs> Interp::eval_args(const Expr& e, size_t first, Scope& scope) {
  CallArgs a;
  for (size_t k = 0; k < e.n_pos; ++k) {
    STRATA_ASSIGN(Value v, eval(*e.kids[first + k], scope));
    a.pos.push_back(std::move(v));
  }
  for (size_t k = 0; k < e.kw_names.size(); ++k) {
    STRATA_ASSIGN(Value v, eval(*e.kids[first + e.n_pos + k], scope));
    a.kw.emplace_back(e.kw_names[k], std::move(v));
  }
  return a;
}

Result<Value> Interp::eval_attr(const Value& obj, const std::string& name) {
  if (obj.is_dict()) {
    if (const Value* v = obj.dict->find(name)) return *v;
  }
  return bound_method(obj, name);
}

Result<Value> Interp::eval_call(const Expr& e, Scope& scope) {
  STRATA_ASSIGN(Value fn, eval(*e.kids[0], scope));
  if (fn.kind != Value::Kind::function) {
    std::string what = e.kids[0]->kind == ExprKind::name   ? e.kids[0]->name
                       : e.kids[0]->kind == ExprKind::attr ? e.kids[0]->name
                                                           : "the value";
    if (fn.is_undefined()) return at(e.pos, "'" + what + "' is undefined (not a function)");
    return at(e.pos, "'" + what + "' (" + kind_name(fn) + ") is not callable");
  }
  STRATA_ASSIGN(CallArgs args, eval_args(e, 1, scope));
  if (auto st = step(); !st.ok()) return at(e.pos, st.message());
  auto r = (*fn.fn)(args);
  if (!r.ok()) return at(e.pos, r.message());
  return r;
}

Result<Value> Interp::eval_binary(const Expr& e, Scope& scope) {
  const std::string& op = e.name;
  STRATA_ASSIGN(Value l, eval(*e.kids[0], scope));
  if (op == "and") return truthy(l) ? eval(*e.kids[1], scope) : Result<Value>(l);
  if (op == "or") return truthy(l) ? Result<Value>(l) : eval(*e.kids[1], scope);
  STRATA_ASSIGN(Value r, eval(*e.kids[1], scope));
  if (op == "==") return Value::boolean(equal(l, r));
  if (op == "!=") return Value::boolean(!equal(l, r));
  if (op == "~") return Value::str(to_str(l) + to_str(r));
  if (op == "in" || op == "not in") {
    auto c = contains(r, l);
    if (!c.ok()) return at(e.pos, c.message());
    return Value::boolean(op == "in" ? *c : !*c);
  }
  if (op == "<" || op == ">" || op == "<=" || op == ">=") {
    auto c = compare(l, r);
    if (!c.ok()) return at(e.pos, op + ": " + c.message());
    const int x = *c;
    return Value::boolean(op == "<" ? x < 0 : op == ">" ? x > 0 : op == "<=" ? x <= 0 : x >= 0);
  }
  auto v = arith(op, l, r);
  if (!v.ok()) return at(e.pos, v.message());
  return v;
}

Result<Value> Interp::eval(const Expr& e, Scope& scope) {
  switch (e.kind) {
    case ExprKind::literal:
      return e.lit;
    case ExprKind::name: {
      if (const Value* v = scope.find(e.name)) return *v;
      if (const Value* g = global_function(e.name)) return *g;
      return Value();
    }
    case ExprKind::list:
    case ExprKind::tuple: {
      List items;
      for (const auto& k : e.kids) {
        STRATA_ASSIGN(Value v, eval(*k, scope));
        items.push_back(std::move(v));
      }
      Value l = Value::new_list(std::move(items));
      l.tuple = e.kind == ExprKind::tuple;
      return l;
    }
    case ExprKind::dict: {
      Value d = Value::new_dict();
      for (size_t k = 0; k + 1 < e.kids.size(); k += 2) {
        STRATA_ASSIGN(Value key, eval(*e.kids[k], scope));
        STRATA_ASSIGN(Value v, eval(*e.kids[k + 1], scope));
        if (key.kind == Value::Kind::integer) d.dict->int_keys = true;
        d.dict->set(key.is_string() ? key.s : to_str(key), std::move(v));
      }
      return d;
    }
    case ExprKind::attr: {
      STRATA_ASSIGN(Value obj, eval(*e.kids[0], scope));
      return eval_attr(obj, e.name);
    }
    case ExprKind::index: {
      STRATA_ASSIGN(Value obj, eval(*e.kids[0], scope));
      STRATA_ASSIGN(Value key, eval(*e.kids[1], scope));
      if (obj.is_dict()) {
        if (key.is_string()) return eval_attr(obj, key.s);
        const Value* v = obj.dict->find(to_str(key));
        return v ? *v : Value();
      }
      if ((obj.is_list() || obj.is_string()) && key.kind == Value::Kind::integer) {
        if (obj.is_list()) {
          const int64_t n = static_cast<int64_t>(obj.list->size());
          const int64_t k = key.i < 0 ? key.i + n : key.i;
          return k >= 0 && k < n ? (*obj.list)[static_cast<size_t>(k)] : Value();
        }
        const auto chars = utf8_chars(obj.s);
        const int64_t n = static_cast<int64_t>(chars.size());
        const int64_t k = key.i < 0 ? key.i + n : key.i;
        return k >= 0 && k < n ? Value::str(chars[static_cast<size_t>(k)]) : Value();
      }
      if (key.is_string()) return eval_attr(obj, key.s);
      if (obj.is_undefined() || obj.is_none()) return Value();
      return at(e.pos, std::string("cannot index a ") + kind_name(obj) + " with a " + kind_name(key));
    }
    case ExprKind::slice: {
      STRATA_ASSIGN(Value obj, eval(*e.kids[0], scope));
      int64_t parts[3] = {0, 0, 1};
      bool given[3] = {false, false, false};
      for (int k = 0; k < 3; ++k) {
        if (!e.kids[static_cast<size_t>(k) + 1]) continue;
        STRATA_ASSIGN(Value p, eval(*e.kids[static_cast<size_t>(k) + 1], scope));
        if (p.is_none() || p.is_undefined()) continue;
        if (p.kind != Value::Kind::integer) return at(e.pos, "slice bounds must be integers");
        parts[k] = p.i;
        given[k] = true;
      }
      const int64_t step = parts[2];
      if (step == 0) return at(e.pos, "slice step cannot be zero");
      std::vector<std::string> chars;
      if (obj.is_string()) chars = utf8_chars(obj.s);
      if (!obj.is_string() && !obj.is_list()) {
        if (obj.is_undefined() || obj.is_none()) return Value();
        return at(e.pos, std::string("cannot slice a ") + kind_name(obj));
      }
      const int64_t n = static_cast<int64_t>(obj.is_string() ? chars.size() : obj.list->size());
      auto norm = [&](int64_t v, bool has, int64_t dflt) {
        if (!has) return dflt;
        if (v < 0) v += n;
        if (step > 0) return std::clamp<int64_t>(v, 0, n);
        return std::clamp<int64_t>(v, -1, n - 1);
      };
      const int64_t start = norm(parts[0], given[0], step > 0 ? 0 : n - 1);
      const int64_t stop = norm(parts[1], given[1], step > 0 ? n : -1);
      std::string s;
      List l;
      for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
        if (obj.is_string())
          s += chars[static_cast<size_t>(k)];
        else
          l.push_back((*obj.list)[static_cast<size_t>(k)]);
      }
      return obj.is_string() ? Value::str(std::move(s)) : Value::new_list(std::move(l));
    }
    case ExprKind::call:
      return eval_call(e, scope);
    case ExprKind::filter: {
      STRATA_ASSIGN(Value v, eval(*e.kids[0], scope));
      STRATA_ASSIGN(CallArgs args, eval_args(e, 1, scope));
      auto r = apply_filter(*this, e.name, v, args);
      if (!r.ok()) return at(e.pos, r.message());
      return r;
    }
    case ExprKind::test: {
      STRATA_ASSIGN(Value v, eval(*e.kids[0], scope));
      STRATA_ASSIGN(CallArgs args, eval_args(e, 1, scope));
      auto r = apply_test(e.name, v, args);
      if (!r.ok()) return at(e.pos, r.message());
      return Value::boolean(e.negate ? !*r : *r);
    }
    case ExprKind::unary: {
      STRATA_ASSIGN(Value v, eval(*e.kids[0], scope));
      if (e.name == "not") return Value::boolean(!truthy(v));
      if (v.kind == Value::Kind::integer) return Value::integer(e.name == "-" ? -v.i : v.i);
      if (v.kind == Value::Kind::floating) return Value::floating(e.name == "-" ? -v.f : v.f);
      if (v.kind == Value::Kind::boolean) return Value::integer(e.name == "-" ? -int64_t{v.b} : v.b);
      return at(e.pos, "unary " + e.name + " of a " + kind_name(v));
    }
    case ExprKind::binary:
      return eval_binary(e, scope);
    case ExprKind::ternary: {
      STRATA_ASSIGN(Value c, eval(*e.kids[0], scope));
      if (truthy(c)) return eval(*e.kids[1], scope);
      if (e.kids[2]) return eval(*e.kids[2], scope);
      return Value();
    }
  }
  return Value();
}

}  // namespace strata::jinja
