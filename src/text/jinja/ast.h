// The parsed template: expression and statement nodes, and the parser that builds them from
// tokens (Jinja's grammar and operator precedence: ternary < or < and < not < comparisons, `in`
// < + - < ~ < * / // % < ** < unary - + < filters `|` and tests `is` < calls, `.attr`, `[i]`).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "text/jinja/lexer.h"
#include "text/jinja/value.h"

namespace strata::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind : uint8_t {
  literal,  // lit
  name,     // name
  list,     // kids: items
  tuple,    // kids: items
  dict,     // kids: key, value, key, value, ...
  attr,     // kids[0].name
  index,    // kids[0][kids[1]]
  slice,    // kids[0][kids[1]:kids[2]:kids[3]] (null kids for omitted parts)
  call,     // kids[0](kids[1..n_pos], kw_names = kids[n_pos+1..])
  filter,   // kids[0] | name(kids[1..])
  test,     // kids[0] is [not] name(kids[1..]); negate
  unary,    // name: "not", "-", "+"; kids[0]
  binary,   // name: the operator; kids[0], kids[1]
  ternary,  // kids[1] if kids[0] else kids[2] (kids[2] null: undefined)
};

struct Expr {
  ExprKind kind = ExprKind::literal;
  Pos pos;
  std::string name;
  Value lit;
  std::vector<ExprPtr> kids;
  size_t n_pos = 0;                   // call / filter / test: positional arguments after kids[0]
  std::vector<std::string> kw_names;  // call / filter / test: names of the keyword arguments after them
  bool negate = false;
  int depth = 1;  // the tree's depth below and including this node (bounded by the parser)
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

enum class StmtKind : uint8_t {
  text,          // text
  output,        // {{ expr }}
  if_,           // conds[k] -> bodies[k]; bodies.size() == conds.size() + 1 when there is an else
  for_,          // for targets in expr [if cond]: bodies[0]; else: bodies[1]
  set,           // set targets = expr, or {% set name %}bodies[0]{% endset %}; attr: ns.attr target
  macro,         // macro name(params = defaults): bodies[0]
  call_block,    // {% call macro(args) %}bodies[0]{% endcall %}: caller() renders the body
  filter_block,  // {% filter f %}bodies[0]{% endfilter %}: expr is the filter applied to a placeholder
  break_,
  continue_,
};

struct Stmt {
  StmtKind kind = StmtKind::text;
  Pos pos;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;                // for: the loop filter
  std::vector<ExprPtr> conds;  // if
  std::vector<Body> bodies;
  std::vector<std::string> targets;  // for / set names; macro: parameter names
  std::string attr;                  // set: ns.attr target (targets[0] is ns)
  std::vector<ExprPtr> defaults;     // macro: a default per parameter (null: none)
};

// The name a filter block's (and a filtered block set's) rendered text is bound to.
inline constexpr const char* kBlockInput = "\x01block";

// Tokens -> statements. Errors name the line and column and what was expected.
Result<Body> parse(const std::vector<Token>& toks);

}  // namespace strata::jinja
