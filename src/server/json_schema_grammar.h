// JSON Schema -> GBNF (runtime/grammar.h), for response_format {type: "json_schema"} and
// llama.cpp's `json_schema` field, and the grammar of any JSON object for {type: "json_object"}.
//
// Supported: type (a name or an array of names: object, array, string, number, integer, boolean,
// null), properties (in key order: nlohmann::json keeps objects sorted, not as written), required,
// additionalProperties (true / false: only the listed properties are generated either way),
// minProperties / maxProperties (counted over the listed properties), items,
// prefixItems (with items false: nothing after), minItems / maxItems, minLength / maxLength, enum,
// const, anyOf, oneOf (as anyOf), allOf with one schema, $ref to "#/$defs/.." or
// "#/definitions/.." (recursion allowed), minimum / maximum / exclusiveMinimum / exclusiveMaximum
// (server/json_schema_numbers.h: exact for integers; for numbers integer bounds only, exact, and
// without an exponent), pattern (server/json_schema_pattern.h; not with lengths or format), format
// date, time, date-time (RFC 3339; no 29 February, no leap second), uuid, email (dot-atoms @
// domain labels), ipv4; annotations (title, description, default, examples, $schema, $id,
// $comment, ...) are ignored. Any other keyword is an error that names it and where it is
// ("... keyword 'multipleOf' at /properties/id"), never silently dropped. A schema without a type
// or structure allows any JSON value. Whitespace between tokens is at most one space, and numbers
// have at most 16 digits per part, so a small model's output ends.
//
//   auto gbnf = json_schema_to_grammar(schema);     // Result<std::string>
//   auto g = Grammar::parse(*gbnf);
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace strata::server {

Result<std::string> json_schema_to_grammar(const nlohmann::json& schema);

// OpenAI function calling: one call, {"name": <one of fns>, "arguments": <its parameters>}.
struct ToolFunction {
  std::string name;
  nlohmann::json parameters;  // a JSON Schema ({} or true: any JSON value)
};
// The call's rule is `root_rule` (another grammar's part when not "root").
Result<std::string> tool_call_grammar(const std::vector<ToolFunction>& fns,
                                      const std::string& root_rule = "root");
// A schema as a part of another grammar: the expression that matches it; its rules (named `prefix`0,
// `prefix`1, ...) are appended to *rules. The grammar holds json_grammar_primitives() once (ws,
// string, value, ...).
Result<std::string> json_schema_part(const nlohmann::json& schema, const std::string& prefix,
                                     std::string* rules);
const char* json_grammar_primitives();
std::string gbnf_literal(const std::string& text);  // a GBNF string literal matching exactly `text`
// Any JSON object (OpenAI's json_object mode).
std::string json_object_grammar();

}  // namespace strata::server
