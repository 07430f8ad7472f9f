#include "text/fim.h"

#include <algorithm>

namespace strata {

Result<std::vector<int32_t>> fim_prompt(const Tokenizer& tok, const FimInput& in, int64_t max_tokens) {
  const FimTokens f = tok.fim_tokens();
  if (!f.usable())
    return err(
        "this model has no fill-in-the-middle tokens (tokenizer.ggml.fim_pre / fim_suf / fim_mid_token_id, "
        "or tokens such as <|fim_prefix|>): infill needs them");
  auto text = [&](const std::string& s) {
    return tok.encode(s, /*add_special=*/false, /*parse_special=*/false);
  };

  // Repository-level context, one piece per chunk so that whole chunks can be dropped.
  std::vector<int32_t> head;  // project name: kept with the first chunk
  if (f.rep >= 0 && !in.extra.empty()) {
    head.push_back(f.rep);
    for (int32_t t : text("myproject\n")) head.push_back(t);
  }
  std::vector<std::vector<int32_t>> chunks;
  for (const FimChunk& c : in.extra) {
    std::vector<int32_t> ids;
    if (f.sep >= 0) {
      ids.push_back(f.sep);
      for (int32_t t : text(c.filename + "\n")) ids.push_back(t);
    } else {
      for (int32_t t : text("\n\n--- snippet ---\n\n")) ids.push_back(t);
    }
    for (int32_t t : text(c.text)) ids.push_back(t);
    chunks.push_back(std::move(ids));
  }
  std::vector<int32_t> file;  // the current file's name, after the other files
  if (f.sep >= 0 && !in.extra.empty()) {
    file.push_back(f.sep);
    for (int32_t t : text("filename\n")) file.push_back(t);
  }
  std::vector<int32_t> prefix = in.prefix, suffix = text(in.suffix);
  const std::vector<int32_t> middle = text(in.middle);
  const int64_t bos = tok.add_bos() && tok.bos_id() >= 0 ? 1 : 0;
  const int64_t fixed = bos + 3 + static_cast<int64_t>(middle.size());
  if (fixed > max_tokens)
    return err(
        "infill prompt: the FIM tokens and the prompt take %lld tokens, more than the %lld the request can "
        "use",
        static_cast<long long>(fixed), static_cast<long long>(max_tokens));

  auto total = [&] {
    int64_t n = fixed + static_cast<int64_t>(prefix.size() + suffix.size());
    if (!chunks.empty()) n += static_cast<int64_t>(head.size() + file.size());
    for (const auto& c : chunks) n += static_cast<int64_t>(c.size());
    return n;
  };
  while (!chunks.empty() && total() > max_tokens) chunks.erase(chunks.begin());
  if (int64_t over = total() - max_tokens; over > 0) {
    // Keep prefix : suffix at 3 : 1 of what is left for them, each capped by what it has.
    const int64_t room = max_tokens - fixed;
    int64_t keep_suf = std::min<int64_t>(static_cast<int64_t>(suffix.size()), room / 4);
    const int64_t keep_pre = std::min<int64_t>(static_cast<int64_t>(prefix.size()), room - keep_suf);
    keep_suf = std::min<int64_t>(static_cast<int64_t>(suffix.size()), room - keep_pre);
    prefix.erase(prefix.begin(), prefix.end() - keep_pre);
    suffix.resize(static_cast<size_t>(keep_suf));
  }

  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(total()));
  if (bos) out.push_back(tok.bos_id());
  if (!chunks.empty()) {
    out.insert(out.end(), head.begin(), head.end());
    for (const auto& c : chunks) out.insert(out.end(), c.begin(), c.end());
    out.insert(out.end(), file.begin(), file.end());
  }
  out.push_back(f.pre);
  out.insert(out.end(), prefix.begin(), prefix.end());
  out.insert(out.end(), middle.begin(), middle.end());
  out.push_back(f.suf);
  out.insert(out.end(), suffix.begin(), suffix.end());
  out.push_back(f.mid);
  return out;
}

}  // namespace strata
