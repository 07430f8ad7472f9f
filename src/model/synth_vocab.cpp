// The synthetic byte-level BPE vocabulary: byte tokens in GPT-2's printable mapping, then merges
// grown from English letter frequencies (so English prompts become multi-byte tokens), then the
// ChatML control tokens.
#include <array>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "model/synth.h"

namespace strata {
namespace {

void append_utf8(std::string* s, uint32_t cp) {
  if (cp < 0x80) {
    s->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    s->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    s->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// GPT-2's byte -> printable code point map: printable Latin-1 bytes map to themselves, the other
// 68 bytes to 256, 257, ... in byte order.
std::array<std::string, 256> byte_token_texts() {
  std::array<std::string, 256> out;
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    append_utf8(&out[b], printable ? b : next++);
  }
  return out;
}

// splitmix64: a tiny, portable deterministic stream (std:: distributions differ across libraries).
struct Mix {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(next() % n); }
};

}  // namespace

SynthVocab synth_vocab(int n_vocab, const std::string& arch) {
  SynthVocab v;
  const auto bytes = byte_token_texts();
  for (auto& t : bytes) {
    v.tokens.push_back(t);
    v.types.push_back(1);
  }
  const int n_control = 3;
  const int n_merges = n_vocab - 256 - n_control;

  // Letters repeated by rough English frequency: drawing from this string favours common letters.
  const std::string weighted =
      "eeeeeeeeeeeetttttttttaaaaaaaaooooooooiiiiiiinnnnnnnsssssshhhhhhrrrrrrddddllllcccuuummmwwffggyyppbbvkjx"
      "qz";
  const std::string space = bytes[' '];  // "Ġ"
  std::unordered_set<std::string> known(v.tokens.begin(), v.tokens.end());
  // Pieces that can be merged further: left pieces may start with a space, right pieces never.
  std::vector<std::string> left = {space}, right;
  for (char c = 'a'; c <= 'z'; ++c) {
    left.emplace_back(1, c);
    right.emplace_back(1, c);
  }
  Mix rng{0x5EEDB0CAull + static_cast<uint64_t>(n_vocab)};
  int made = 0;
  while (made < n_merges) {
    // Mostly extend with a single frequent letter; sometimes join two merged pieces.
    std::string l = left[rng.below(static_cast<uint32_t>(left.size()))];
    std::string r = rng.below(4) ? std::string(1, weighted[rng.below(static_cast<uint32_t>(weighted.size()))])
                                 : right[rng.below(static_cast<uint32_t>(right.size()))];
    // Keep early merges short so common prefixes exist before long words do.
    const size_t max_len = 2 + static_cast<size_t>(made) / 64;
    const std::string joined = l + r;
    const size_t n_chars = joined.size() - (joined.rfind(space, 0) == 0 ? space.size() - 1 : 0);
    if (n_chars > std::min<size_t>(max_len, 10) || known.count(joined)) continue;
    known.insert(joined);
    v.merges.push_back(l + " " + r);
    v.tokens.push_back(joined);
    v.types.push_back(1);
    left.push_back(joined);
    if (joined.rfind(space, 0) != 0) right.push_back(joined);
    ++made;
  }
  for (const char* c : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    v.tokens.emplace_back(c);
    v.types.push_back(3);
  }
  const int32_t eot = n_vocab - 3, im_end = n_vocab - 1;
  v.bos = eot;
  v.eos = arch == "llama" ? eot : im_end;
  v.pre = arch == "llama" ? "default" : "qwen2";
  return v;
}

}  // namespace strata
