#include "text/vocab.h"

#include "text/utf8.h"

#include <algorithm>
#include <initializer_list>
#include <limits>

namespace strata::text {
namespace {

uint32_t attr_of_type(int32_t type) {
  switch (static_cast<TokenType>(type)) {
    case TokenType::normal:
      return kAttrNormal;
    case TokenType::unknown:
      return kAttrUnknown;
    case TokenType::control:
      return kAttrControl;
    case TokenType::user_defined:
      return kAttrUserDefined;
    case TokenType::unused:
      return kAttrUnused;
    case TokenType::byte:
      return kAttrByte;
    default:
      return kAttrUndefined;  // llama.cpp maps unknown type values to "undefined" too
  }
}

// First token (in list order) whose text is one of `texts`; -1 if none.
int32_t find_first(const Vocab& v, std::initializer_list<const char*> texts) {
  for (const char* t : texts) {
    if (int32_t id = v.find(t); id >= 0) return id;
  }
  return -1;
}

// Token texts that end generation, and the ones that name eot / fim tokens (llama.cpp's lists).
constexpr std::initializer_list<const char*> kEotTexts = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<\xef\xbd\x9c"
    "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "<end_of_utterance>"};
constexpr std::initializer_list<const char*> kEogTexts = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<\xef\xbd\x9c"
    "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "[e~["};
// The fill-in-the-middle tokens' usual texts: Qwen / StarCoder / DeepSeek-Coder / CodeLlama / GLM.
constexpr std::initializer_list<const char*> kFimPreTexts = {"<|fim_prefix|>",
                                                             "<fim-prefix>",
                                                             "<fim_prefix>",
                                                             "<\xef\xbd\x9c"
                                                             "fim\xe2\x96\x81"
                                                             "begin\xef\xbd\x9c>",
                                                             "<PRE>",
                                                             "\xe2\x96\x81<PRE>",
                                                             "<|code_prefix|>"};
constexpr std::initializer_list<const char*> kFimSufTexts = {"<|fim_suffix|>",
                                                             "<fim-suffix>",
                                                             "<fim_suffix>",
                                                             "<\xef\xbd\x9c"
                                                             "fim\xe2\x96\x81"
                                                             "hole\xef\xbd\x9c>",
                                                             "<SUF>",
                                                             "\xe2\x96\x81<SUF>",
                                                             "<|code_suffix|>"};
constexpr std::initializer_list<const char*> kFimMidTexts = {"<|fim_middle|>",
                                                             "<fim-middle>",
                                                             "<fim_middle>",
                                                             "<\xef\xbd\x9c"
                                                             "fim\xe2\x96\x81"
                                                             "end\xef\xbd\x9c>",
                                                             "<MID>",
                                                             "\xe2\x96\x81<MID>",
                                                             "<|code_middle|>"};
constexpr std::initializer_list<const char*> kFimPadTexts = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
                                                             "[PAD]"};
constexpr std::initializer_list<const char*> kFimRepTexts = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                                             "<REPO>", "<reponame>"};
constexpr std::initializer_list<const char*> kFimSepTexts = {"<|file_sep|>"};

bool is_white_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Drops the White_Space an lstrip / rstrip token swallows from the text fragments beside it
// (HF tokenizers' AddedVocabulary), and the fragments left empty.
void strip_beside_tokens(const Vocab& vocab, std::vector<Fragment>* frags) {
  std::vector<Fragment>& f = *frags;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i].token < 0) continue;
    const uint8_t bits = vocab.strip[f[i].token];
    if ((bits & kStripLeft) && i > 0 && f[i - 1].token < 0) {
      std::string_view& t = f[i - 1].text;
      while (!t.empty()) {  // back up over whole code points
        size_t start = t.size() - 1;
        while (start > 0 && (static_cast<uint8_t>(t[start]) & 0xC0) == 0x80) --start;
        size_t pos = start;
        if (!is_white_space(utf8_decode_one(t, &pos))) break;
        t.remove_suffix(t.size() - start);
      }
    }
    if ((bits & kStripRight) && i + 1 < f.size() && f[i + 1].token < 0) {
      std::string_view& t = f[i + 1].text;
      while (!t.empty()) {
        size_t pos = 0;
        if (!is_white_space(utf8_decode_one(t, &pos))) break;
        t.remove_prefix(pos);
      }
    }
  }
  f.erase(std::remove_if(f.begin(), f.end(), [](const Fragment& x) { return x.token < 0 && x.text.empty(); }),
          f.end());
}

}  // namespace

Result<Vocab> Vocab::build(VocabData& d) {
  const size_t n = d.tokens.size();
  if (n == 0) return err("tokenizer.ggml.tokens is missing or empty");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    return err("tokenizer.ggml.tokens has %zu entries, more than int32 ids can address", n);
  if (!d.scores.empty() && d.scores.size() != n)
    return err("tokenizer.ggml.scores has %zu entries but tokenizer.ggml.tokens has %zu", d.scores.size(), n);
  if (!d.token_types.empty() && d.token_types.size() != n)
    return err("tokenizer.ggml.token_type has %zu entries but tokenizer.ggml.tokens has %zu",
               d.token_types.size(), n);

  if (!d.token_strip.empty() && d.token_strip.size() != n)
    return err("token strip flags have %zu entries but there are %zu tokens", d.token_strip.size(), n);

  Vocab v;
  v.strip = d.token_strip;
  v.leftmost_longest = d.leftmost_longest;
  v.text = std::move(d.tokens);
  d.tokens.clear();
  v.score = d.scores.empty() ? std::vector<float>(n, 0.0f) : d.scores;
  v.attr.resize(n, kAttrNormal);
  for (size_t i = 0; i < n; ++i) {
    if (!d.token_types.empty()) v.attr[i] = attr_of_type(d.token_types[i]);
    if (v.text[i].empty()) v.text[i] = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp: keep ids dense
  }
  int32_t first = -1;
  if (const int32_t dup = v.index.build(v.text, &first); dup >= 0)
    return err("tokenizer.ggml.tokens: token %d '%s' duplicates token %d", dup, v.text[dup].c_str(), first);
  return v;
}

Status Vocab::finish_specials(const VocabData& d, int32_t default_bos, int32_t default_eos,
                              int32_t default_unk, bool default_add_bos) {
  auto pick = [&](const std::optional<int64_t>& given, int32_t dflt) -> int32_t {
    // Out-of-range ids in the file are ignored (llama.cpp keeps the default and warns).
    if (given && *given >= 0 && *given < n()) return static_cast<int32_t>(*given);
    return dflt >= 0 && dflt < n() ? dflt : -1;
  };
  bos = pick(d.bos_id, default_bos);
  eos = pick(d.eos_id, default_eos);
  unk = pick(d.unk_id, default_unk);
  pad = pick(d.pad_id, -1);
  eot = pick(d.eot_id, -1);
  eom = pick(d.eom_id, -1);
  fim_pre = pick(d.fim_pre_id, -1);
  fim_suf = pick(d.fim_suf_id, -1);
  fim_mid = pick(d.fim_mid_id, -1);
  fim_pad = pick(d.fim_pad_id, -1);
  fim_rep = pick(d.fim_rep_id, -1);
  fim_sep = pick(d.fim_sep_id, -1);
  add_bos = d.add_bos.value_or(default_add_bos);
  add_eos = d.add_eos.value_or(false);
  if (add_bos && bos < 0)
    return err("tokenizer.ggml.add_bos_token is true but there is no valid bos token id");
  if (add_eos && eos < 0)
    return err("tokenizer.ggml.add_eos_token is true but there is no valid eos token id");

  // Tokens found by their text are control tokens whatever the file says (llama.cpp does this
  // so that e.g. a "<|im_end|>" typed normal still ends generation and is not printed).
  auto by_text = [&](int32_t* id, std::initializer_list<const char*> texts) {
    if (*id >= 0) return;  // given by the metadata: trust it
    *id = find_first(*this, texts);
    if (*id >= 0) attr[*id] |= kAttrControl;
  };
  by_text(&eot, kEotTexts);
  by_text(&eom, {"<|eom_id|>"});
  by_text(&fim_pre, kFimPreTexts);
  by_text(&fim_suf, kFimSufTexts);
  by_text(&fim_mid, kFimMidTexts);
  by_text(&fim_pad, kFimPadTexts);
  by_text(&fim_rep, kFimRepTexts);
  by_text(&fim_sep, kFimSepTexts);

  for (int32_t id = 0; id < n(); ++id) {
    if ((attr[id] & kAttrControl) && text[id].find("unused") != std::string::npos) attr[id] |= kAttrUnused;
  }

  eog.clear();
  for (int32_t id : {fim_pad, fim_rep, fim_sep, eos, eot, eom}) {
    if (id >= 0) eog.insert(id);
  }
  for (const char* t : kEogTexts) {
    if (int32_t id = find(t); id >= 0) {
      eog.insert(id);
      attr[id] |= kAttrControl;
    }
  }
  // gpt-oss (harmony) markers are always rendered, and "<|end|>" only ends a message there.
  for (const char* t : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    if (int32_t id = find(t); id >= 0) attr[id] = kAttrUserDefined;
  }
  const int32_t end_id = find("<|end|>");
  auto in_eog = [&](const char* t) { return eog.count(find(t)) > 0; };
  if (end_id >= 0 && eog.count(end_id) &&
      ((in_eog("<|return|>") && in_eog("<|call|>")) || (in_eog("<|calls|>") && in_eog("<|flush|>")))) {
    eog.erase(end_id);
    attr[end_id] = kAttrUserDefined;
  }

  specials.clear();
  for (int32_t id = 0; id < n(); ++id) {
    if (attr[id] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) specials.push_back(id);
  }
  std::stable_sort(specials.begin(), specials.end(),
                   [&](int32_t a, int32_t b) { return text[a].size() > text[b].size(); });
  specials_by_byte.clear();
  if (leftmost_longest) {
    specials_by_byte.resize(256);
    for (int32_t id : specials) specials_by_byte[static_cast<uint8_t>(text[id][0])].push_back(id);
  }
  return {};
}

namespace {

// HF's scan: at each position the longest special token that starts there, else move on.
std::vector<Fragment> partition_leftmost_longest(const Vocab& vocab, std::string_view text,
                                                 bool parse_special) {
  std::vector<Fragment> frags;
  size_t start = 0;  // of the pending plain text
  for (size_t pos = 0; pos < text.size();) {
    int32_t hit = -1;
    for (int32_t id : vocab.specials_by_byte[static_cast<uint8_t>(text[pos])]) {
      if (!parse_special && (vocab.attr[id] & (kAttrControl | kAttrUnknown))) continue;
      if (text.compare(pos, vocab.text[id].size(), vocab.text[id]) == 0) {
        hit = id;
        break;
      }
    }
    if (hit < 0) {
      ++pos;
      continue;
    }
    if (pos > start) frags.push_back({-1, text.substr(start, pos - start)});
    frags.push_back({hit, vocab.text[hit]});
    pos += vocab.text[hit].size();
    start = pos;
  }
  if (start < text.size()) frags.push_back({-1, text.substr(start)});
  return frags;
}

}  // namespace

std::vector<Fragment> partition_specials(const Vocab& vocab, std::string_view text, bool parse_special) {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  if (vocab.leftmost_longest) {
    frags = partition_leftmost_longest(vocab, text, parse_special);
    if (!vocab.strip.empty()) strip_beside_tokens(vocab, &frags);
    return frags;
  }
  frags.push_back({-1, text});
  std::vector<Fragment> next;
  for (int32_t id : vocab.specials) {
    if (!parse_special && (vocab.attr[id] & (kAttrControl | kAttrUnknown))) continue;
    const std::string_view tok = vocab.text[id];
    bool found = false;
    for (const Fragment& f : frags) {
      if (f.token < 0 && f.text.find(tok) != std::string_view::npos) {
        found = true;
        break;
      }
    }
    if (!found) continue;
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      std::string_view rest = f.text;
      for (size_t at; (at = rest.find(tok)) != std::string_view::npos;) {
        if (at > 0) next.push_back({-1, rest.substr(0, at)});
        next.push_back({id, tok});
        rest.remove_prefix(at + tok.size());
      }
      if (!rest.empty()) next.push_back({-1, rest});
    }
    frags.swap(next);
  }
  if (!vocab.strip.empty()) strip_beside_tokens(vocab, &frags);
  return frags;
}

}  // namespace strata::text
