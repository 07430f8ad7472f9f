// Jinja's tests (`x is defined`, `is string`, `is mapping`, `is equalto`, ...).
#include <initializer_list>

#include "text/jinja/interp.h"

namespace strata::jinja {

Result<bool> apply_test(const std::string& n, const Value& v, CallArgs& a) {
  using K = Value::Kind;
  if (n == "defined") return !v.is_undefined();
  if (n == "undefined") return v.is_undefined();
  if (n == "none") return v.is_none();
  if (n == "boolean") return v.kind == K::boolean;
  if (n == "true") return v.kind == K::boolean && v.b;
  if (n == "false") return v.kind == K::boolean && !v.b;
  if (n == "integer") return v.kind == K::integer;
  if (n == "float") return v.kind == K::floating;
  if (n == "number") return v.is_number();
  if (n == "string") return v.is_string();
  if (n == "mapping") return v.is_dict();
  if (n == "iterable") return v.is_list() || v.is_dict() || v.is_string();
  if (n == "sequence") return v.is_list() || v.is_dict() || v.is_string();
  if (n == "callable") return v.kind == K::function;
  if (n == "lower") return v.is_string() && ascii_lower(v.s) == v.s;
  if (n == "upper") return v.is_string() && ascii_upper(v.s) == v.s;
  if (n == "odd" || n == "even") {
    if (v.kind != K::integer) return err("test %s: needs an integer, got %s", n.c_str(), kind_name(v));
    return (v.i % 2 != 0) == (n == "odd");
  }
  const Value* other = a.get(0, "value");
  const Value none;
  const Value& o = other ? *other : none;
  if (n == "divisibleby") {
    if (v.kind != K::integer || o.kind != K::integer || o.i == 0)
      return err("test divisibleby: needs integers");
    return v.i % o.i == 0;
  }
  if (n == "eq" || n == "equalto" || n == "==") return equal(v, o);
  if (n == "ne" || n == "!=") return !equal(v, o);
  if (n == "sameas")
    return v.kind == o.kind && (v.kind == K::list   ? v.list == o.list
                                : v.kind == K::dict ? v.dict == o.dict
                                                    : equal(v, o));
  if (n == "in") {
    if (o.is_string()) return v.is_string() && o.s.find(v.s) != std::string::npos;
    STRATA_ASSIGN(List items, iterate(o));
    if (o.is_dict()) return v.is_string() && o.dict->find(v.s) != nullptr;
    for (const Value& x : items)
      if (equal(x, v)) return true;
    return false;
  }
  struct Order {
    const char* names[3];
    int want;
  };
  static constexpr Order kOrders[] = {{{"lt", "lessthan", "<"}, 0},
                                      {{"le", "<=", nullptr}, 1},
                                      {{"gt", "greaterthan", ">"}, 2},
                                      {{"ge", ">=", nullptr}, 3}};
  for (const auto& [names, want] : kOrders) {
    for (const char* name : names) {
      if (!name || n != name) continue;
      STRATA_ASSIGN(int c, compare(v, o));
      return want == 0 ? c < 0 : want == 1 ? c <= 0 : want == 2 ? c > 0 : c >= 0;
    }
  }
  return err("unknown test '%s'", n.c_str());
}

}  // namespace strata::jinja
