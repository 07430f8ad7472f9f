#include "text/spm.h"

#include <cstdio>
#include <queue>

#include "text/utf8.h"

namespace strata::text {

static constexpr std::string_view kSpace = "\xe2\x96\x81";  // U+2581 "▁"

Result<std::unique_ptr<SpmTokenizer>> SpmTokenizer::create(VocabData data) {
  if (data.model != "llama")
    return err("SentencePiece tokenizer needs tokenizer.ggml.model 'llama', got '%s'", data.model.c_str());
  const bool space_prefix = data.add_space_prefix.value_or(true);
  STRATA_ASSIGN(Vocab vocab, Vocab::build(data));
  // SentencePiece defaults: <unk> = 0, <s> = 1, </s> = 2, BOS added.
  STRATA_TRY(vocab.finish_specials(data, 1, 2, 0, true));
  std::unique_ptr<SpmTokenizer> t(new SpmTokenizer(std::move(vocab), data.model, "default"));
  t->add_space_prefix_ = space_prefix;
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    int32_t id = t->vocab_.find(hex);
    if (id < 0) {
      const char c = static_cast<char>(b);
      id = t->vocab_.find(std::string_view(&c, 1));
    }
    t->byte_token_[b] = id;
  }
  return t;
}

void SpmTokenizer::encode_fragment(std::string_view text, bool first_or_after_special,
                                   std::vector<int32_t>* out) const {
  std::string s;
  s.reserve(text.size() * 3 + 3);
  if (add_space_prefix_ && first_or_after_special) s += kSpace;
  for (char c : text) {
    if (c == ' ')
      s += kSpace;
    else
      s += c;
  }
  encode_escaped(s, out);
}

void SpmTokenizer::encode_escaped(const std::string& text, std::vector<int32_t>* out) const {
  struct Sym {
    size_t start;
    uint32_t len;  // bytes; 0 once merged into the left neighbour
    int32_t prev, next;
  };
  // One symbol per UTF-8 character, by lead byte only (no validation, as llama.cpp).
  std::vector<Sym> sym;
  sym.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t n = std::min(utf8_seq_len(static_cast<uint8_t>(text[pos])), text.size() - pos);
    const int32_t idx = static_cast<int32_t>(sym.size());
    sym.push_back({pos, static_cast<uint32_t>(n), idx - 1, pos + n < text.size() ? idx + 1 : -1});
    pos += n;
  }
  struct Cand {
    float score;
    int32_t left, right;
    uint32_t len;  // merged length when queued: stale if either side changed since
  };
  auto lower = [](const Cand& a, const Cand& b) {
    return a.score != b.score ? a.score < b.score : a.left > b.left;
  };
  std::priority_queue<Cand, std::vector<Cand>, decltype(lower)> queue(lower);
  const std::string_view all(text);
  auto consider = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const uint32_t len = sym[l].len + sym[r].len;
    const int32_t id = vocab_.find(all.substr(sym[l].start, len));
    if (id < 0) return;
    queue.push({vocab_.score[id], l, r, len});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) consider(i - 1, i);

  while (!queue.empty()) {
    const Cand c = queue.top();
    queue.pop();
    Sym& l = sym[c.left];
    Sym& r = sym[c.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != c.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }

  for (int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) {
    const std::string_view piece = all.substr(sym[i].start, sym[i].len);
    if (int32_t id = vocab_.find(piece); id >= 0) {
      out->push_back(id);
      continue;
    }
    // Only single characters can be left without a token (merges always form tokens).
    for (char ch : piece) {
      const int32_t id =
          byte_token_[static_cast<uint8_t>(ch)] >= 0 ? byte_token_[static_cast<uint8_t>(ch)] : vocab_.unk;
      if (id >= 0) out->push_back(id);
    }
  }
}

std::string SpmTokenizer::token_to_piece(int32_t id, bool special) const {
  bool handled = false;
  std::string piece = special_piece(id, special, &handled);
  if (handled) return piece;
  const std::string& text = vocab_.text[id];
  const uint32_t a = vocab_.attr[id];
  if (a & kAttrNormal) {
    for (size_t pos = 0; pos < text.size();) {
      if (text.compare(pos, kSpace.size(), kSpace) == 0) {
        piece += ' ';
        pos += kSpace.size();
      } else {
        piece += text[pos++];
      }
    }
    return piece;
  }
  if ((a & kAttrByte) && text.size() >= 5) {  // "<0xXX>"
    return std::string(1, static_cast<char>(std::strtol(text.substr(3, 2).c_str(), nullptr, 16)));
  }
  return piece;
}

}  // namespace strata::text
