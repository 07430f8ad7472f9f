#include "text/bpe.h"

#include <cstdio>
#include <queue>

#include "text/unicode_nfc.h"
#include "text/utf8.h"

namespace strata::text {

Result<std::unique_ptr<BpeTokenizer>> BpeTokenizer::create(VocabData data) {
  if (data.pre.empty()) data.pre = "default";
  BpeOptions opt;
  STRATA_ASSIGN(opt.pre, pre_tokenizer_info(data.pre));
  return create(std::move(data), std::move(opt));
}

Result<std::unique_ptr<BpeTokenizer>> BpeTokenizer::create(VocabData data, BpeOptions opt) {
  if (data.model != "gpt2")
    return err("BPE tokenizer needs tokenizer.ggml.model 'gpt2', got '%s'", data.model.c_str());
  STRATA_ASSIGN(std::unique_ptr<PreTokenizer> pt, PreTokenizer::create(opt.pre.regexes, opt.dialect));
  STRATA_ASSIGN(Vocab vocab, Vocab::build(data));
  // No implicit BOS/EOS ids for BPE vocabs (llama.cpp's default of 11 is a GPT-NeoX leftover).
  STRATA_TRY(vocab.finish_specials(data, -1, -1, -1, opt.pre.add_bos));
  if (data.merges.empty())
    return err("tokenizer.ggml.merges is missing or empty (required for a gpt2 tokenizer)");

  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer(std::move(vocab), data.model, data.pre));
  t->pre_tokenizer_ = std::move(pt);
  t->opt_ = std::move(opt);
  const Vocab& v = t->vocab_;
  for (int b = 0; b < 256; ++b) t->byte_token_[b] = v.find(byte_to_utf8(static_cast<uint8_t>(b)));

  t->merges_.reserve(data.merges.size());
  std::string joined;
  for (size_t i = 0; i < data.merges.size(); ++i) {
    const std::string& m = data.merges[i];
    const size_t sp = m.find(' ', 1);  // from 1: a left half may itself be " "
    if (sp == std::string::npos)
      return err("tokenizer.ggml.merges[%zu] = '%s' is not of the form 'left right'", i, m.c_str());
    const std::string_view left = std::string_view(m).substr(0, sp);
    const std::string_view right = std::string_view(m).substr(sp + 1);
    const int32_t l = v.find(left), r = v.find(right);
    if (l < 0 || r < 0)
      return err("tokenizer.ggml.merges[%zu] = '%s' references '%.*s', which is not in tokenizer.ggml.tokens",
                 i, m.c_str(), static_cast<int>((l < 0 ? left : right).size()),
                 (l < 0 ? left : right).data());
    joined.assign(left);
    joined.append(right);
    const int32_t res = v.find(joined);
    if (res < 0) continue;  // can never produce a token; llama.cpp would fall back to bytes here
    t->merges_.insert(l, r, {static_cast<int32_t>(i), res});  // first rank wins
  }
  return t;
}

void BpeTokenizer::encode_fragment(std::string_view text, bool, std::vector<int32_t>* out) const {
  std::string buf;
  if (opt_.nfc) {
    buf = nfc(text);
    text = buf;
  }
  if (opt_.add_prefix_space && !text.empty() && text[0] != ' ') {
    buf = " " + std::string(text);  // copies before assigning: text may view buf
    text = buf;
  }
  for (const std::string& w : pre_tokenizer_->split(text)) encode_word(w, out);
}

bool BpeTokenizer::encode_unknown_byte(uint8_t byte, bool after_unk, std::vector<int32_t>* out) const {
  const std::string& cpt = byte_to_utf8(byte);
  if (!opt_.hf_unknown) {
    // llama.cpp tries each UTF-8 byte of that character as a one-byte token and drops the
    // ones that do not exist.
    for (char c : cpt) {
      if (int32_t id = vocab_.find(std::string_view(&c, 1)); id >= 0) out->push_back(id);
    }
    return false;
  }
  if (opt_.byte_fallback) {
    int32_t ids[4];
    size_t n = 0;
    for (char c : cpt) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", static_cast<uint8_t>(c));
      if ((ids[n] = vocab_.find(name)) < 0) break;
      ++n;
    }
    if (n == cpt.size()) {
      out->insert(out->end(), ids, ids + n);
      return false;
    }
  }
  if (vocab_.unk < 0) return false;
  if (!(opt_.fuse_unk && after_unk)) out->push_back(vocab_.unk);
  return true;
}

void BpeTokenizer::encode_word(std::string_view raw, std::vector<int32_t>* out) const {
  if (raw.empty()) return;
  if (opt_.pre.ignore_merges) {
    if (int32_t id = vocab_.find(byte_level_encode(raw)); id >= 0) {
      out->push_back(id);
      return;
    }
  }
  // One symbol per byte (= one alphabet character); linked list over a vector.
  struct Sym {
    int32_t id;
    int32_t prev, next;
    uint32_t len;  // raw bytes covered; 0 once merged into the left neighbour
  };
  std::vector<Sym> sym(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    sym[i] = {byte_token_[static_cast<uint8_t>(raw[i])], static_cast<int32_t>(i) - 1,
              i + 1 < raw.size() ? static_cast<int32_t>(i + 1) : -1, 1};
  }
  struct Cand {
    int32_t rank, left, right, result;
    uint32_t len;  // left.len + right.len when queued: stale if either side changed since
  };
  auto later = [](const Cand& a, const Cand& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  };
  std::priority_queue<Cand, std::vector<Cand>, decltype(later)> queue(later);
  auto consider = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0 || sym[l].id < 0 || sym[r].id < 0) return;
    const MergeTable::Merge* m = merges_.find(sym[l].id, sym[r].id);
    if (!m) return;
    queue.push({m->rank, l, r, m->result, sym[l].len + sym[r].len});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) consider(i - 1, i);

  while (!queue.empty()) {
    const Cand c = queue.top();
    queue.pop();
    Sym& l = sym[c.left];
    Sym& r = sym[c.right];
    if (l.len == 0 || r.len == 0 || l.next != c.right || l.len + r.len != c.len) continue;
    l.id = c.result;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }

  bool after_unk = false;
  for (int32_t i = 0; i >= 0 && i < static_cast<int32_t>(sym.size()); i = sym[i].next) {
    if (sym[i].id >= 0) {
      out->push_back(sym[i].id);
      after_unk = false;
      continue;
    }
    after_unk = encode_unknown_byte(static_cast<uint8_t>(raw[i]), after_unk, out);
  }
}

std::string BpeTokenizer::token_to_piece(int32_t id, bool special) const {
  bool handled = false;
  std::string piece = special_piece(id, special, &handled);
  if (handled) return piece;
  const std::string& text = vocab_.text[id];
  const uint32_t a = vocab_.attr[id];
  if (a & kAttrNormal) {
    for (size_t pos = 0; pos < text.size();) {
      const size_t start = pos;
      const int b = cpt_to_byte(utf8_decode_one(text, &pos));
      if (b >= 0) {
        piece.push_back(static_cast<char>(b));
        continue;
      }
      // Not in the byte alphabet: keep it visible rather than dropping it (llama.cpp's marker).
      piece += "[UNK_BYTE_0x";
      for (size_t k = start; k < pos; ++k) {
        char hex[3];
        std::snprintf(hex, sizeof(hex), "%02x", static_cast<uint8_t>(text[k]));
        piece += hex;
      }
      piece += text + "]";
    }
    return piece;
  }
  if ((a & kAttrByte) && text.size() >= 5) {  // "<0xXX>"
    return std::string(1, static_cast<char>(std::strtol(text.substr(3, 2).c_str(), nullptr, 16)));
  }
  return piece;
}

}  // namespace strata::text
