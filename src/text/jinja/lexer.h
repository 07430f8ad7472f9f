// Jinja source -> tokens. The source is first prepared as Hugging Face renders chat templates
// (and @huggingface/jinja does by default): one trailing newline dropped, lstrip_blocks (spaces and
// tabs before a `{%` / `{#` at the start of a line removed), trim_blocks (the newline after a `%}` /
// `#}` removed), and `{% generation %}` / `{% endgeneration %}` markers taken out. Then `{{-`,
// `{%-`, `{#-` strip the whitespace before them and `-}}`, `-%}`, `-#}` the whitespace after.
// Every token keeps its line and column in the original source, for error messages.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace strata::jinja {

struct Pos {
  int line = 1;
  int col = 1;
};

enum class Tok : uint8_t {
  text,        // raw text between tags
  open_expr,   // {{
  close_expr,  // }}
  open_stmt,   // {%
  close_stmt,  // %}
  name,
  string,  // value: the unescaped text
  integer,
  floating,
  op,  // value: the operator or punctuation ("==", "(", ...)
  eof,
};

struct Token {
  Tok kind = Tok::eof;
  std::string value;
  Pos pos;
};

// Errors name the line and column ("line 3, column 7: unterminated string").
Result<std::vector<Token>> lex(std::string_view source);

// "line L, column C: " for messages.
std::string pos_prefix(Pos p);

}  // namespace strata::jinja
