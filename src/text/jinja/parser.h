// The Jinja parser's class, shared by parser.cpp (statements) and parser_expr.cpp (expressions):
// recursive descent over the lexer's tokens (ast.h). Internal to src/text/jinja/.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <string_view>

#include "text/jinja/ast.h"

namespace strata::jinja::detail {

inline constexpr int kMaxNesting = 200;    // expression / block nesting at most (untrusted input)
inline constexpr int kMaxExprDepth = 300;  // an expression tree's depth at most

inline bool one_of(std::string_view s, std::initializer_list<std::string_view> set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& toks) : t_(toks) {}

  Result<Body> top() {
    std::string end;
    STRATA_ASSIGN(Body b, body({}, &end));
    return b;
  }

 private:
  const Token& peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& next() {
    const Token& t = peek();
    if (i_ < t_.size() - 1) ++i_;
    return t;
  }
  bool is_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == Tok::op && peek(ahead).value == op;
  }
  bool is_name(std::string_view n, size_t ahead = 0) const {
    return peek(ahead).kind == Tok::name && peek(ahead).value == n;
  }
  bool accept_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool accept_name(std::string_view n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::eof:
        return "the end of the template";
      case Tok::text:
        return "text";
      case Tok::close_expr:
        return "}}";
      case Tok::close_stmt:
        return "%}";
      case Tok::string:
        return "a string";
      default:
        return "'" + t.value + "'";
    }
  }
  Error fail(const Token& t, const std::string& msg) const { return Error{pos_prefix(t.pos) + msg}; }
  Error expected(const std::string& what) const {
    return fail(peek(), "expected " + what + ", got " + describe(peek()));
  }
  Status expect_op(std::string_view op) {
    if (!accept_op(op)) return expected("'" + std::string(op) + "'");
    return {};
  }
  Status close_stmt() {
    if (peek().kind != Tok::close_stmt) return expected("%}");
    next();
    return {};
  }
  Result<std::string> ident() {
    if (peek().kind != Tok::name) return expected("a name");
    return next().value;
  }

  static ExprPtr node(ExprKind k, Pos p) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->pos = p;
    return e;
  }

  // Statements up to a {% NAME %} with NAME in `ends` (consumed; *end names it) or the end.
  Result<Body> body(std::initializer_list<std::string_view> ends, std::string* end);
  Result<std::unique_ptr<Stmt>> statement();
  // The text a filter block or a filtered block set renders, as a name the evaluator binds.
  static ExprPtr block_input(Pos p);
  // An expression, or a tuple of them without parentheses (`a, b`); with_ternary false for a
  // for loop's iterable (its `if` is the loop filter).
  Result<ExprPtr> tuple_or(bool with_ternary);
  Result<ExprPtr> expression();
  ExprPtr binary(std::string op, Pos p, ExprPtr l, ExprPtr r);
  Status seal(Expr& e);
  Result<ExprPtr> or_expr();
  Result<ExprPtr> and_expr();
  Result<ExprPtr> not_expr();
  Result<ExprPtr> compare();
  Result<ExprPtr> add();
  Result<ExprPtr> concat();
  Result<ExprPtr> mul();
  Result<ExprPtr> pow();
  Result<ExprPtr> unary();
  // `| f(args)` filters and `is [not] test args` tests after an operand.
  Result<ExprPtr> filters(ExprPtr e);
  // One filter (after a `|`, or the first of a filter block) and any that follow it.
  Result<ExprPtr> filter_chain(ExprPtr e, bool first_bar);
  // "(a, b, k=v)" into kids after kids[0].
  Status arguments(Expr* e);
  Result<ExprPtr> postfix(ExprPtr e);
  Result<ExprPtr> primary();

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace strata::jinja::detail
