// The synthetic byte-level BPE vocabulary: byte tokens in GPT-2's printable mapping, then merges
// grown from English letter frequencies (so English prompts become multi-byte tokens), then the
// ChatML control tokens.
#include <array>
#include <cstdlib>
#include <map>
#include <utility>
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

// Common English words with rough relative frequencies (written for strata; any list would do).
// BPE merges learnt from them make English prompts tokenize into word-sized pieces.
const char* const kWords =
    "the 70 of 36 and 29 to 26 a 23 in 21 is 10 that 10 for 9 it 9 as 7 was 7 with 7 be 6 by 6 on 6 not 5 "
    "he 5 this 5 are 5 or 5 his 5 from 5 at 5 which 4 but 4 have 4 an 4 had 4 they 4 you 4 were 3 their 3 "
    "one 3 all 3 we 3 can 3 her 3 has 3 there 3 been 3 if 3 more 3 when 3 will 3 would 3 who 3 so 3 no 2 "
    "she 2 other 2 its 2 out 2 into 2 time 2 only 2 new 2 some 2 could 2 these 2 two 2 may 2 first 2 then 2 "
    "do 2 any 2 like 2 my 2 now 2 over 2 such 2 our 2 man 2 me 2 even 2 most 2 made 2 after 2 also 2 did 2 "
    "many 2 before 2 must 2 through 2 back 2 years 2 where 2 much 2 your 2 way 2 well 2 down 2 should 2 "
    "because 2 each 2 just 2 those 2 people 2 how 2 too 2 little 2 state 2 good 2 very 2 make 2 world 2 "
    "still 2 own 2 see 2 men 2 work 2 long 2 get 2 here 2 between 2 both 2 life 2 being 2 under 2 never 2 "
    "day 2 same 2 another 2 know 2 while 2 last 2 might 2 us 2 great 2 old 2 year 2 off 2 come 2 since 2 "
    "against 1 go 1 came 1 right 1 used 1 take 1 three 1 hello 1 quick 1 brown 1 fox 1 jumps 1 lazy 1 dog 1 "
    "once 1 upon 1 story 1 model 1 text 1 token 1 language 1 house 1 water 1 light 1 night 1 small 1 "
    "large 1 number 1 question 1 answer 1 system 1 program 1 example 1 memory 1 expert 1 mixture 1 "
    "there 1 thing 1 think 1 thought 1 nothing 1 something 1 everything 1 running 1 going 1 being 1 "
    "called 1 asked 1 looked 1 turned 1 wanted 1 started 1 reading 1 writing 1 interesting 1 "
    "The 8 It 3 In 3 He 2 This 2 She 2 We 2 They 2 A 2 I 4 Hello 1 Once 1 What 1 When 1 There 1";

// Byte-pair merges learnt from kWords (each word with a leading space, as the pre-tokenizers
// split it), most frequent pair first, ties broken by text for determinism.
std::vector<std::pair<std::string, std::string>> english_merges(const std::string& space, int max_merges) {
  struct Word {
    std::vector<std::string> sym;
    int count;
  };
  std::vector<Word> words;
  const std::string list = kWords;
  for (size_t i = 0; i < list.size();) {
    const size_t sp = list.find(' ', i), sp2 = list.find(' ', sp + 1);
    const std::string w = list.substr(i, sp - i);
    const int n =
        std::atoi(list.substr(sp + 1, sp2 == std::string::npos ? std::string::npos : sp2 - sp - 1).c_str());
    Word word{{space}, n};
    for (char c : w) word.sym.emplace_back(1, c);
    words.push_back(word);
    if (sp2 == std::string::npos) break;
    i = sp2 + 1;
  }
  std::vector<std::pair<std::string, std::string>> merges;
  while (static_cast<int>(merges.size()) < max_merges) {
    std::map<std::pair<std::string, std::string>, int> pairs;
    for (auto& w : words) {
      for (size_t k = 0; k + 1 < w.sym.size(); ++k) pairs[{w.sym[k], w.sym[k + 1]}] += w.count;
    }
    const std::pair<std::string, std::string>* best = nullptr;
    int best_n = 0;  // until every listed word is one token
    for (auto& [pr, n] : pairs) {
      if (n > best_n) best = &pr, best_n = n;
    }
    if (!best) break;
    const auto [l, r] = *best;
    merges.emplace_back(l, r);
    for (auto& w : words) {
      std::vector<std::string> out;
      for (size_t k = 0; k < w.sym.size(); ++k) {
        if (k + 1 < w.sym.size() && w.sym[k] == l && w.sym[k + 1] == r) {
          out.push_back(l + r);
          ++k;
        } else {
          out.push_back(w.sym[k]);
        }
      }
      w.sym = std::move(out);
    }
  }
  return merges;
}

}  // namespace

SynthVocab synth_vocab(int n_vocab, const std::string& arch, bool fim) {
  SynthVocab v;
  const auto bytes = byte_token_texts();
  for (auto& t : bytes) {
    v.tokens.push_back(t);
    v.types.push_back(1);
  }
  static constexpr const char* kFim[] = {"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>",
                                         "<|fim_pad|>",    "<|repo_name|>",  "<|file_sep|>"};
  // deepseek_v41: DeepSeek's BOS / EOS (control) and chat markers (user-defined), as its
  // tokenizer.json holds them; the other archs: ChatML's three control tokens.
  const bool ds = arch == "deepseek_v41";
  static constexpr const char* kDeepseek[] = {"<｜begin▁of▁sentence｜>",
                                              "<｜end▁of▁sentence｜>",
                                              "<｜User｜>",
                                              "<｜Assistant｜>",
                                              "<think>",
                                              "</think>"};
  const int n_control = (ds ? 6 : 3) + (fim ? 6 : 0);
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
  // A merge whose result is already a token (reachable by another pair order) adds no token.
  int made = 0;  // tokens added by merges
  auto add_merge = [&](const std::string& l, const std::string& r) {
    const std::string joined = l + r;
    v.merges.push_back(l + " " + r);
    if (!known.insert(joined).second) return;
    ++made;
    v.tokens.push_back(joined);
    v.types.push_back(1);
    left.push_back(joined);
    if (joined.rfind(space, 0) != 0) right.push_back(joined);
  };
  for (const auto& [l, r] : english_merges(space, n_merges)) {
    if (made == n_merges) break;
    add_merge(l, r);
  }
  Mix rng{0x5EEDB0CAull + static_cast<uint64_t>(n_vocab)};
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
    add_merge(l, r);
  }
  if (fim) {
    const auto first = static_cast<int32_t>(v.tokens.size());
    for (const char* c : kFim) {
      v.tokens.emplace_back(c);
      v.types.push_back(3);
    }
    v.fim_pre = first, v.fim_suf = first + 1, v.fim_mid = first + 2;
    v.fim_pad = first + 3, v.fim_rep = first + 4, v.fim_sep = first + 5;
  }
  if (ds) {
    const auto first = static_cast<int32_t>(v.tokens.size());
    for (int i = 0; i < 6; ++i) {
      v.tokens.emplace_back(kDeepseek[i]);
      v.types.push_back(i < 2 ? 3 : 4);
    }
    v.bos = first;
    v.eos = first + 1;
    v.pre = "deepseek-v3";
    return v;
  }
  for (const char* c : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    v.tokens.emplace_back(c);
    v.types.push_back(3);
  }
  const int32_t eot = n_vocab - 3, im_end = n_vocab - 1;
  v.bos = eot;
  v.eos = arch == "llama" ? eot : im_end;
  v.pre = arch == "llama" ? "default" : (arch == "deepseek4" ? "joyai-llm" : "qwen2");
  return v;
}

}  // namespace strata
