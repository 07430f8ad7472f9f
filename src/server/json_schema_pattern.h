// A JSON Schema `pattern` (an ECMAScript regular expression) as a GBNF expression for the JSON
// string that holds a match (server/json_schema_grammar.h): the quotes included, characters that
// JSON must escape written escaped (\" \\ \n \t \r).
//
// Supported: literals, `.` (any character but a line break), classes [a-z] [^...] with ranges and
// \d \w \s inside, escapes (\d \D \w \W \s \S, \. and other escaped punctuation, \n \r \t \f \v,
// \xHH, \uHHHH), groups ( ) and (?: ), alternation |, quantifiers ? * + {m} {m,} {m,n} (lazy forms
// as the same language), and the anchors ^ at the start and $ at the end. As in JSON Schema a
// pattern matches anywhere in the string: without ^ (or $) any text may come before (or after).
// Anything else (backreferences, lookaround, \b, anchors inside, named groups) is an error that
// says what and where.
//
//   auto e = pattern_to_grammar("^[A-Z]{2}-\\d+$");   // Result<std::string>, a GBNF expression
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace strata::server {

Result<std::string> pattern_to_grammar(std::string_view pattern);

}  // namespace strata::server
