// Unicode NFC (canonical composition) of UTF-8 text, for tokenizer.json normalizers. Uses ICU.
#pragma once

#include <string>
#include <string_view>

namespace strata::text {

// Invalid UTF-8 is first replaced as utf8_decode does (U+FFFD per bad byte); never fails.
std::string nfc(std::string_view utf8);

}  // namespace strata::text
