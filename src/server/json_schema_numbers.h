// Numeric bounds of a JSON Schema as grammar (server/json_schema_grammar.h): the decimal numbers
// in a range spelled as alternatives of digit classes, so the bounds hold exactly.
//
//   integer_range_grammar(lo, hi)       // integers in [lo, hi] (either side open: nullopt)
//   number_range_grammar(lo, lo_excl, hi, hi_excl)   // numbers with integer bounds, no exponent
//
// Integers have no leading zeros and, unbounded, at most 16 digits (as the unbounded integer rule);
// numbers have at most 16 fraction digits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace strata::server {

std::string integer_range_grammar(std::optional<int64_t> lo, std::optional<int64_t> hi);
// Numbers between integer bounds (exclusive or not). Empty when no number fits.
std::string number_range_grammar(std::optional<int64_t> lo, bool lo_excl, std::optional<int64_t> hi,
                                 bool hi_excl);

}  // namespace strata::server
