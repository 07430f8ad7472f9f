#include "runtime/utf8_stream.h"

namespace strata {

// Expected sequence length from a lead byte; 0 for a continuation byte, 1 for invalid leads.
static size_t utf8_seq_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xC0) == 0x80) return 0;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;
}

size_t utf8_complete_prefix(std::string_view s) {
  // Only the last (up to 3) bytes can belong to an unfinished sequence: find the last lead byte.
  const size_t n = s.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const size_t i = n - back;
    const size_t len = utf8_seq_len(static_cast<unsigned char>(s[i]));
    if (len == 0) continue;     // continuation byte: keep looking for its lead
    return len > back ? i : n;  // lead of a sequence still missing bytes -> hold it back
  }
  return n;  // only continuation bytes at the end (invalid): pass through
}

std::string Utf8Stream::push(std::string_view piece) {
  buf_.append(piece);
  const size_t k = utf8_complete_prefix(buf_);
  std::string out = buf_.substr(0, k);
  buf_.erase(0, k);
  return out;
}

std::string Utf8Stream::flush() {
  std::string out;
  out.swap(buf_);
  return out;
}

}  // namespace strata
