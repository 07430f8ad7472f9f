#include "text/utf8.h"

#include <array>

namespace strata::text {

size_t utf8_seq_len(uint8_t lead) {
  if (lead < 0xC0) return 1;  // ASCII or a stray continuation byte
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

static bool is_cont(std::string_view t, size_t i) {
  return i < t.size() && (static_cast<uint8_t>(t[i]) & 0xC0) == 0x80;
}

uint32_t utf8_decode_one(std::string_view t, size_t* pos) {
  const size_t i = *pos;
  const uint8_t b0 = static_cast<uint8_t>(t[i]);
  if (b0 < 0x80) {
    *pos = i + 1;
    return b0;
  }
  // Lead byte -> number of continuation bytes; 0xF8..0xFF and stray continuations are invalid.
  size_t n = 0;
  uint32_t cpt = 0;
  if ((b0 & 0xE0) == 0xC0) {
    n = 1;
    cpt = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 2;
    cpt = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 3;
    cpt = b0 & 0x07;
  }
  bool ok = n > 0;
  for (size_t k = 1; ok && k <= n; ++k) ok = is_cont(t, i + k);
  if (!ok) {
    *pos = i + 1;
    return kReplacementChar;
  }
  for (size_t k = 1; k <= n; ++k) cpt = (cpt << 6) | (static_cast<uint8_t>(t[i + k]) & 0x3F);
  *pos = i + 1 + n;
  return cpt;
}

std::vector<uint32_t> utf8_decode(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) out.push_back(utf8_decode_one(text, &pos));
  return out;
}

void utf8_append(std::string* out, uint32_t c) {
  if (c > 0x10FFFF) c = kReplacementChar;
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string utf8_encode(const std::vector<uint32_t>& cpts) {
  std::string out;
  out.reserve(cpts.size());
  for (uint32_t c : cpts) utf8_append(&out, c);
  return out;
}

namespace {

struct ByteAlphabet {
  std::array<uint32_t, 256> cpt{};
  std::array<std::string, 256> utf8;
  std::array<int16_t, 324> back{};  // cpt -> byte; alphabet cpts are all < 0x144

  ByteAlphabet() {
    back.fill(-1);
    auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; };
    uint32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      cpt[b] = printable(b) ? static_cast<uint32_t>(b) : next++;
      utf8_append(&utf8[b], cpt[b]);
      back[cpt[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

}  // namespace

uint32_t byte_to_cpt(uint8_t b) {
  return alphabet().cpt[b];
}
const std::string& byte_to_utf8(uint8_t b) {
  return alphabet().utf8[b];
}

int cpt_to_byte(uint32_t cpt) {
  return cpt < alphabet().back.size() ? alphabet().back[cpt] : -1;
}

std::string byte_level_encode(std::string_view raw) {
  std::string out;
  out.reserve(raw.size() * 2);
  for (char c : raw) out += byte_to_utf8(static_cast<uint8_t>(c));
  return out;
}

}  // namespace strata::text
