// The Jinja parser, expressions: Jinja's precedence from the ternary down to literals, filters,
// tests, calls, attributes and subscripts (parser.h).
#include "text/jinja/parser.h"

namespace strata::jinja::detail {

// An expression, or a tuple of them without parentheses (`a, b`); with_ternary false for a
// for loop's iterable (its `if` is the loop filter).
Result<ExprPtr> Parser::tuple_or(bool with_ternary) {
  const Pos p = peek().pos;
  STRATA_ASSIGN(ExprPtr first, with_ternary ? expression() : or_expr());
  if (!is_op(",")) return first;
  auto t = node(ExprKind::tuple, p);
  t->kids.push_back(std::move(first));
  while (accept_op(",")) {
    STRATA_ASSIGN(auto e, with_ternary ? expression() : or_expr());
    t->kids.push_back(std::move(e));
  }
  return t;
}

Result<ExprPtr> Parser::expression() {
  if (++depth_ > kMaxNesting) return fail(peek(), "expression nested deeper than 200");
  STRATA_ASSIGN(ExprPtr e, or_expr());
  while (is_name("if")) {
    const Pos p = next().pos;
    auto t = node(ExprKind::ternary, p);
    STRATA_ASSIGN(auto c, or_expr());
    t->kids.push_back(std::move(c));
    t->kids.push_back(std::move(e));
    if (accept_name("else")) {
      STRATA_ASSIGN(auto f, expression());
      t->kids.push_back(std::move(f));
    } else {
      t->kids.push_back(nullptr);
    }
    e = std::move(t);
    STRATA_TRY(seal(*e));
  }
  --depth_;
  return e;
}

// An expression's depth (node chains such as a + b + c.. or x|f|g.. nest without recursing in the
// parser): bounded, so evaluating and freeing it cannot exhaust the stack.
Status Parser::seal(Expr& e) {
  for (const auto& k : e.kids)
    if (k) e.depth = std::max(e.depth, k->depth + 1);
  if (e.depth > kMaxExprDepth)
    return Error{pos_prefix(e.pos) + "expression nested deeper than " + std::to_string(kMaxExprDepth)};
  return {};
}

ExprPtr Parser::binary(std::string op, Pos p, ExprPtr l, ExprPtr r) {
  auto b = node(ExprKind::binary, p);
  b->name = std::move(op);
  b->kids.push_back(std::move(l));
  b->kids.push_back(std::move(r));
  return b;
}

Result<ExprPtr> Parser::or_expr() {
  STRATA_ASSIGN(ExprPtr l, and_expr());
  while (is_name("or")) {
    const Pos p = next().pos;
    STRATA_ASSIGN(auto r, and_expr());
    l = binary("or", p, std::move(l), std::move(r));
    STRATA_TRY(seal(*l));
  }
  return l;
}

Result<ExprPtr> Parser::and_expr() {
  STRATA_ASSIGN(ExprPtr l, not_expr());
  while (is_name("and")) {
    const Pos p = next().pos;
    STRATA_ASSIGN(auto r, not_expr());
    l = binary("and", p, std::move(l), std::move(r));
    STRATA_TRY(seal(*l));
  }
  return l;
}

Result<ExprPtr> Parser::not_expr() {
  if (is_name("not")) {
    if (++depth_ > kMaxNesting) return fail(peek(), "expression nested deeper than 200");
    auto u = node(ExprKind::unary, next().pos);
    u->name = "not";
    STRATA_ASSIGN(auto e, not_expr());
    u->kids.push_back(std::move(e));
    --depth_;
    STRATA_TRY(seal(*u));
    return u;
  }
  return compare();
}

Result<ExprPtr> Parser::compare() {
  STRATA_ASSIGN(ExprPtr l, add());
  while (true) {
    const Token& t = peek();
    std::string op;
    if (t.kind == Tok::op && one_of(t.value, {"==", "!=", "<", ">", "<=", ">="})) {
      op = t.value;
      next();
    } else if (is_name("in")) {
      op = "in";
      next();
    } else if (is_name("not") && is_name("in", 1)) {
      op = "not in";
      next();
      next();
    } else {
      return l;
    }
    STRATA_ASSIGN(auto r, add());
    l = binary(op, t.pos, std::move(l), std::move(r));
    STRATA_TRY(seal(*l));
  }
}

Result<ExprPtr> Parser::add() {
  STRATA_ASSIGN(ExprPtr l, concat());
  while (is_op("+") || is_op("-")) {
    const Token& t = next();
    STRATA_ASSIGN(auto r, concat());
    l = binary(t.value, t.pos, std::move(l), std::move(r));
    STRATA_TRY(seal(*l));
  }
  return l;
}

Result<ExprPtr> Parser::concat() {
  STRATA_ASSIGN(ExprPtr l, mul());
  while (is_op("~")) {
    const Token& t = next();
    STRATA_ASSIGN(auto r, mul());
    l = binary("~", t.pos, std::move(l), std::move(r));
    STRATA_TRY(seal(*l));
  }
  return l;
}

Result<ExprPtr> Parser::mul() {
  STRATA_ASSIGN(ExprPtr l, pow());
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const Token& t = next();
    STRATA_ASSIGN(auto r, pow());
    l = binary(t.value, t.pos, std::move(l), std::move(r));
    STRATA_TRY(seal(*l));
  }
  return l;
}

Result<ExprPtr> Parser::pow() {
  STRATA_ASSIGN(ExprPtr l, unary());
  while (is_op("**")) {
    const Token& t = next();
    STRATA_ASSIGN(auto r, unary());
    l = binary("**", t.pos, std::move(l), std::move(r));
    STRATA_TRY(seal(*l));
  }
  return l;
}

Result<ExprPtr> Parser::unary() {
  if (is_op("-") || is_op("+")) {
    if (++depth_ > kMaxNesting) return fail(peek(), "expression nested deeper than 200");
    const Token& t = next();
    auto u = node(ExprKind::unary, t.pos);
    u->name = t.value;
    STRATA_ASSIGN(auto e, unary());
    u->kids.push_back(std::move(e));
    --depth_;
    STRATA_TRY(seal(*u));
    return u;
  }
  STRATA_ASSIGN(ExprPtr e, primary());
  STRATA_ASSIGN(e, postfix(std::move(e)));
  return filters(std::move(e));
}

// `| f(args)` filters and `is [not] test args` tests after an operand.
Result<ExprPtr> Parser::filters(ExprPtr e) {
  while (true) {
    if (is_op("|")) {
      STRATA_ASSIGN(e, filter_chain(std::move(e), true));
    } else if (is_name("is")) {
      const Pos p = next().pos;
      auto t = node(ExprKind::test, p);
      t->negate = accept_name("not");
      if (peek().kind != Tok::name) return expected("a test name");
      t->name = next().value;
      t->kids.push_back(std::move(e));
      if (is_op("(")) {
        STRATA_TRY(arguments(t.get()));
      } else {
        const Token& a = peek();
        const bool arg = a.kind == Tok::string || a.kind == Tok::integer || a.kind == Tok::floating ||
                         (a.kind == Tok::op && (a.value == "[" || a.value == "{" || a.value == "-")) ||
                         (a.kind == Tok::name &&
                          !one_of(a.value, {"else", "or", "and", "if", "is", "in", "not", "recursive"}));
        if (arg) {
          STRATA_ASSIGN(auto v, add());
          t->kids.push_back(std::move(v));
          t->n_pos = 1;
        }
      }
      e = std::move(t);
      STRATA_TRY(seal(*e));
    } else {
      return e;
    }
  }
}

// One filter (after a `|`, or the first of a filter block) and any that follow it.
Result<ExprPtr> Parser::filter_chain(ExprPtr e, bool first_bar) {
  bool bar = first_bar;
  do {
    if (bar) next();
    bar = true;
    if (peek().kind != Tok::name) return expected("a filter name");
    const Token& n = next();
    auto f = node(ExprKind::filter, n.pos);
    f->name = n.value;
    while (accept_op(".")) {  // dotted filter names are not Jinja's, but keep the error clear
      STRATA_ASSIGN(auto more, ident());
      f->name += "." + more;
    }
    f->kids.push_back(std::move(e));
    if (is_op("(")) STRATA_TRY(arguments(f.get()));
    e = std::move(f);
    STRATA_TRY(seal(*e));
  } while (is_op("|"));
  return e;
}

// "(a, b, k=v)" into kids after kids[0].
Status Parser::arguments(Expr* e) {
  STRATA_TRY(expect_op("("));
  while (!is_op(")")) {
    if (peek().kind == Tok::name && is_op("=", 1)) {
      e->kw_names.push_back(next().value);
      next();
      STRATA_ASSIGN(auto v, expression());
      e->kids.push_back(std::move(v));
    } else {
      if (!e->kw_names.empty()) return fail(peek(), "a positional argument after a keyword argument");
      STRATA_ASSIGN(auto v, expression());
      e->kids.push_back(std::move(v));
      ++e->n_pos;
    }
    if (!accept_op(",")) break;
  }
  return expect_op(")");
}

Result<ExprPtr> Parser::postfix(ExprPtr e) {
  while (true) {
    const Token& t = peek();
    if (is_op(".")) {
      next();
      auto a = node(ExprKind::attr, t.pos);
      if (peek().kind == Tok::integer) {  // x.0 is x[0] in Jinja
        auto idx = node(ExprKind::literal, peek().pos);
        idx->lit = Value::integer(std::stoll(next().value));
        a->kind = ExprKind::index;
        a->kids.push_back(std::move(e));
        a->kids.push_back(std::move(idx));
      } else {
        STRATA_ASSIGN(a->name, ident());
        a->kids.push_back(std::move(e));
      }
      e = std::move(a);
      STRATA_TRY(seal(*e));
    } else if (is_op("[")) {
      next();
      auto ix = node(ExprKind::index, t.pos);
      ix->kids.push_back(std::move(e));
      ExprPtr parts[3];
      int n = 0;
      bool is_slice = false;
      while (true) {
        if (!is_op(":") && !is_op("]")) {
          STRATA_ASSIGN(parts[n], expression());
        }
        if (is_op(":") && n < 2) {
          next();
          is_slice = true;
          ++n;
          continue;
        }
        break;
      }
      STRATA_TRY(expect_op("]"));
      if (is_slice) {
        ix->kind = ExprKind::slice;
        for (auto& p : parts) ix->kids.push_back(std::move(p));
      } else {
        if (!parts[0]) return fail(t, "empty subscript []");
        ix->kids.push_back(std::move(parts[0]));
      }
      e = std::move(ix);
      STRATA_TRY(seal(*e));
    } else if (is_op("(")) {
      auto c = node(ExprKind::call, t.pos);
      c->kids.push_back(std::move(e));
      STRATA_TRY(arguments(c.get()));
      e = std::move(c);
      STRATA_TRY(seal(*e));
    } else {
      return e;
    }
  }
}

Result<ExprPtr> Parser::primary() {
  const Token& t = peek();
  if (++depth_ > kMaxNesting) return fail(t, "expression nested deeper than 200");
  ExprPtr e;
  switch (t.kind) {
    case Tok::name: {
      next();
      e = node(ExprKind::literal, t.pos);
      if (t.value == "true" || t.value == "True") {
        e->lit = Value::boolean(true);
      } else if (t.value == "false" || t.value == "False") {
        e->lit = Value::boolean(false);
      } else if (t.value == "none" || t.value == "None") {
        e->lit = Value::none();
      } else {
        e->kind = ExprKind::name;
        e->name = t.value;
      }
      break;
    }
    case Tok::string: {
      std::string s;
      while (peek().kind == Tok::string) s += next().value;
      e = node(ExprKind::literal, t.pos);
      e->lit = Value::str(std::move(s));
      break;
    }
    case Tok::integer:
    case Tok::floating: {
      next();
      e = node(ExprKind::literal, t.pos);
      if (t.kind == Tok::integer) {
        errno = 0;
        const long long v = std::strtoll(t.value.c_str(), nullptr, 10);
        if (errno == ERANGE) return fail(t, "integer " + t.value + " is too large");
        e->lit = Value::integer(v);
      } else {
        e->lit = Value::floating(std::strtod(t.value.c_str(), nullptr));
      }
      break;
    }
    case Tok::op:
      if (t.value == "(") {
        next();
        if (accept_op(")")) {
          e = node(ExprKind::tuple, t.pos);
          break;
        }
        STRATA_ASSIGN(e, expression());
        if (is_op(",")) {
          auto tup = node(ExprKind::tuple, t.pos);
          tup->kids.push_back(std::move(e));
          while (accept_op(",")) {
            if (is_op(")")) break;
            STRATA_ASSIGN(auto x, expression());
            tup->kids.push_back(std::move(x));
          }
          e = std::move(tup);
        }
        STRATA_TRY(expect_op(")"));
        break;
      }
      if (t.value == "[") {
        next();
        e = node(ExprKind::list, t.pos);
        while (!is_op("]")) {
          STRATA_ASSIGN(auto x, expression());
          e->kids.push_back(std::move(x));
          if (!accept_op(",")) break;
        }
        STRATA_TRY(expect_op("]"));
        break;
      }
      if (t.value == "{") {
        next();
        e = node(ExprKind::dict, t.pos);
        while (!is_op("}")) {
          STRATA_ASSIGN(auto k, expression());
          STRATA_TRY(expect_op(":"));
          STRATA_ASSIGN(auto v, expression());
          e->kids.push_back(std::move(k));
          e->kids.push_back(std::move(v));
          if (!accept_op(",")) break;
        }
        STRATA_TRY(expect_op("}"));
        break;
      }
      [[fallthrough]];
    default:
      return expected("an expression");
  }
  --depth_;
  return e;
}
}  // namespace strata::jinja::detail
