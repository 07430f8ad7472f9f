// UTF-8 helpers with llama.cpp's tolerance rules, and GPT-2's byte <-> unicode mapping.
//
// Tokenizers must accept any bytes. The decoder here never fails: a byte that does not start a
// well-formed sequence becomes U+FFFD and decoding resumes at the next byte (overlong forms and
// surrogates are accepted as-is, like llama.cpp), so token ids match llama.cpp on bad input too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::text {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Length of the sequence a lead byte announces (1 for ASCII and stray continuation bytes).
size_t utf8_seq_len(uint8_t lead);

// Decode one code point at text[*pos]; advances *pos by at least 1.
uint32_t utf8_decode_one(std::string_view text, size_t* pos);
std::vector<uint32_t> utf8_decode(std::string_view text);

// Append the UTF-8 form of cpt (values above U+10FFFF append U+FFFD).
void utf8_append(std::string* out, uint32_t cpt);
std::string utf8_encode(const std::vector<uint32_t>& cpts);

// GPT-2 byte-level alphabet: every byte maps to one printable code point (printable Latin-1
// bytes map to themselves, the other 68 to U+0100..U+0143 in byte order).
uint32_t byte_to_cpt(uint8_t b);
const std::string& byte_to_utf8(uint8_t b);  // UTF-8 of byte_to_cpt(b)
int cpt_to_byte(uint32_t cpt);               // inverse; -1 when cpt is not in the alphabet

// Byte-level encode raw bytes: each byte -> its alphabet character (UTF-8).
std::string byte_level_encode(std::string_view raw);

}  // namespace strata::text
