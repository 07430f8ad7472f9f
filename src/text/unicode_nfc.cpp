#include "text/unicode_nfc.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>

#include "base/assert.h"
#include "text/utf8.h"

namespace strata::text {

std::string nfc(std::string_view in) {
  UErrorCode ec = U_ZERO_ERROR;
  const icu::Normalizer2* norm = icu::Normalizer2::getNFCInstance(ec);
  STRATA_ASSERT(U_SUCCESS(ec) && norm != nullptr);  // ICU's built-in data: present in every build
  // PCRE2 and ICU want valid UTF-8: the same replacement as the rest of text/ (lone surrogates,
  // which the lenient decoder keeps, become U+FFFD too).
  std::vector<uint32_t> cpts = utf8_decode(in);
  for (uint32_t& c : cpts) {
    if (c >= 0xD800 && c <= 0xDFFF) c = kReplacementChar;
  }
  const std::string valid = utf8_encode(cpts);
  const icu::StringPiece sp(valid.data(), static_cast<int32_t>(valid.size()));
  if (norm->isNormalizedUTF8(sp, ec) && U_SUCCESS(ec)) return valid;
  ec = U_ZERO_ERROR;
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(valid.size()));
  norm->normalizeUTF8(0, sp, sink, nullptr, ec);
  STRATA_ASSERT(U_SUCCESS(ec));
  return out;
}

}  // namespace strata::text
