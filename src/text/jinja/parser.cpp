// The Jinja parser, statements: text, {{ }}, if / for / set / macro / call / filter blocks,
// break / continue (parser.h; expressions in parser_expr.cpp).
#include "text/jinja/parser.h"

namespace strata::jinja {
namespace detail {

// Statements up to a {% NAME %} with NAME in `ends` (consumed; *end names it) or the end.
Result<Body> Parser::body(std::initializer_list<std::string_view> ends, std::string* end) {
  if (++depth_ > kMaxNesting) return fail(peek(), "blocks nested deeper than 200");
  Body out;
  while (true) {
    const Token& t = peek();
    if (t.kind == Tok::eof) {
      if (ends.size() == 0) break;
      return fail(t, "unexpected end of template: expected {% " + std::string(*(ends.end() - 1)) + " %}");
    }
    if (t.kind == Tok::text) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::text;
      s->text = next().value;
      out.push_back(std::move(s));
      continue;
    }
    if (t.kind == Tok::open_expr) {
      next();
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::output;
      s->pos = t.pos;
      STRATA_ASSIGN(s->expr, expression());
      if (peek().kind != Tok::close_expr) return expected("}}");
      next();
      out.push_back(std::move(s));
      continue;
    }
    if (t.kind != Tok::open_stmt) return fail(t, "unexpected " + describe(t));
    if (peek(1).kind == Tok::name && one_of(peek(1).value, ends)) {
      next();
      *end = next().value;
      break;
    }
    next();
    STRATA_ASSIGN(auto s, statement());
    out.push_back(std::move(s));
  }
  --depth_;
  return out;
}

Result<std::unique_ptr<Stmt>> Parser::statement() {
  const Token& kw = peek();
  if (kw.kind != Tok::name) return expected("a statement name");
  auto s = std::make_unique<Stmt>();
  s->pos = kw.pos;
  const std::string name = next().value;
  std::string end;
  if (name == "if") {
    s->kind = StmtKind::if_;
    STRATA_ASSIGN(auto c, expression());
    s->conds.push_back(std::move(c));
    STRATA_TRY(close_stmt());
    while (true) {
      STRATA_ASSIGN(Body b, body({"elif", "else", "endif"}, &end));
      s->bodies.push_back(std::move(b));
      if (end == "elif") {
        STRATA_ASSIGN(auto c2, expression());
        s->conds.push_back(std::move(c2));
        STRATA_TRY(close_stmt());
      } else if (end == "else") {
        STRATA_TRY(close_stmt());
        STRATA_ASSIGN(Body e, body({"endif"}, &end));
        s->bodies.push_back(std::move(e));
        break;
      } else {
        break;
      }
    }
    STRATA_TRY(close_stmt());
  } else if (name == "for") {
    s->kind = StmtKind::for_;
    bool paren = accept_op("(");
    do {
      STRATA_ASSIGN(auto n, ident());
      s->targets.push_back(std::move(n));
    } while (accept_op(","));
    if (paren) STRATA_TRY(expect_op(")"));
    if (!accept_name("in")) return expected("'in'");
    STRATA_ASSIGN(s->expr, tuple_or(false));
    if (accept_name("if")) {
      STRATA_ASSIGN(s->cond, expression());
    }
    if (is_name("recursive")) return fail(peek(), "recursive for loops are not supported");
    STRATA_TRY(close_stmt());
    STRATA_ASSIGN(Body b, body({"else", "endfor"}, &end));
    s->bodies.push_back(std::move(b));
    if (end == "else") {
      STRATA_TRY(close_stmt());
      STRATA_ASSIGN(Body e, body({"endfor"}, &end));
      s->bodies.push_back(std::move(e));
    }
    STRATA_TRY(close_stmt());
  } else if (name == "set") {
    s->kind = StmtKind::set;
    STRATA_ASSIGN(auto n, ident());
    s->targets.push_back(std::move(n));
    if (accept_op(".")) {
      STRATA_ASSIGN(s->attr, ident());
    } else {
      while (accept_op(",")) {
        STRATA_ASSIGN(auto m, ident());
        s->targets.push_back(std::move(m));
      }
    }
    if (accept_op("=")) {
      STRATA_ASSIGN(s->expr, tuple_or(true));
      STRATA_TRY(close_stmt());
    } else {
      if (s->targets.size() != 1 || !s->attr.empty()) return expected("'='");
      // {% set x | filter %}..{% endset %}: the filter applies to the block's text.
      if (is_op("|")) {
        STRATA_ASSIGN(s->expr, filters(block_input(peek().pos)));
      }
      STRATA_TRY(close_stmt());
      STRATA_ASSIGN(Body b, body({"endset"}, &end));
      s->bodies.push_back(std::move(b));
      STRATA_TRY(close_stmt());
    }
  } else if (name == "macro") {
    s->kind = StmtKind::macro;
    STRATA_ASSIGN(s->text, ident());
    STRATA_TRY(expect_op("("));
    while (!is_op(")")) {
      STRATA_ASSIGN(auto p, ident());
      s->targets.push_back(std::move(p));
      ExprPtr def;
      if (accept_op("=")) {
        STRATA_ASSIGN(def, expression());
      }
      s->defaults.push_back(std::move(def));
      if (!accept_op(",")) break;
    }
    STRATA_TRY(expect_op(")"));
    STRATA_TRY(close_stmt());
    STRATA_ASSIGN(Body b, body({"endmacro"}, &end));
    s->bodies.push_back(std::move(b));
    STRATA_TRY(close_stmt());
  } else if (name == "call") {
    s->kind = StmtKind::call_block;
    if (is_op("(")) return fail(peek(), "call blocks with caller arguments are not supported");
    STRATA_ASSIGN(s->expr, expression());
    if (s->expr->kind != ExprKind::call) return fail(kw, "{% call %} needs a macro call");
    STRATA_TRY(close_stmt());
    STRATA_ASSIGN(Body b, body({"endcall"}, &end));
    s->bodies.push_back(std::move(b));
    STRATA_TRY(close_stmt());
  } else if (name == "filter") {
    s->kind = StmtKind::filter_block;
    ExprPtr in = block_input(kw.pos);
    STRATA_ASSIGN(s->expr, filter_chain(std::move(in), /*first_bar=*/false));
    STRATA_TRY(close_stmt());
    STRATA_ASSIGN(Body b, body({"endfilter"}, &end));
    s->bodies.push_back(std::move(b));
    STRATA_TRY(close_stmt());
  } else if (name == "break" || name == "continue") {
    s->kind = name == "break" ? StmtKind::break_ : StmtKind::continue_;
    STRATA_TRY(close_stmt());
  } else {
    if (name.starts_with("end") || name == "elif" || name == "else")
      return fail(kw, "unexpected {% " + name + " %}: no open block takes it here");
    return fail(kw, "unknown or unsupported statement '" + name + "'");
  }
  return s;
}

// The text a filter block or a filtered block set renders, as a name the evaluator binds.
ExprPtr Parser::block_input(Pos p) {
  auto e = node(ExprKind::name, p);
  e->name = kBlockInput;
  return e;
}
}  // namespace detail

Result<Body> parse(const std::vector<Token>& toks) {
  return detail::Parser(toks).top();
}

}  // namespace strata::jinja
