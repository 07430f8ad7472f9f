// Streams token pieces as text without ever splitting a UTF-8 character: a multi-byte character
// whose bytes arrive in different tokens (byte-level BPE does this for emoji, CJK, ...) is held
// back until it is complete.
//
//   Utf8Stream s;
//   out(s.push(piece));  // complete characters only
//   out(s.flush());      // at the end: whatever is left, even if incomplete
#pragma once

#include <string>
#include <string_view>

namespace strata {

// Length of the longest prefix of `s` that does not end inside an unfinished UTF-8 sequence.
// Invalid bytes count as complete one-byte sequences (they are passed through, not held).
size_t utf8_complete_prefix(std::string_view s);

class Utf8Stream {
 public:
  std::string push(std::string_view piece);
  std::string flush();
  bool pending() const { return !buf_.empty(); }

 private:
  std::string buf_;
};

}  // namespace strata
