#include "server/logprobs_json.h"

#include <algorithm>

#include "base/status.h"

namespace strata::server {

using nlohmann::json;

namespace {

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

}  // namespace

void LogprobsJson::clear() {
  n_ = 0;
  if (chat_) {
    j_ = json{{"content", json::array()}};
  } else {
    j_ = json{{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  }
}

void LogprobsJson::add_token(int32_t id, const TokenLogprob* lp) {
  const std::string piece = tok_.token_to_piece(id, /*special=*/true);
  ++n_;
  STRATA_ASSERT(lp || !chat_);  // chat has no echo: every token is scored
  if (chat_) {
    json top = json::array();
    for (const TopLogprob& t : lp->top) {
      const std::string p = tok_.token_to_piece(t.id, true);
      top.push_back(json{{"token", p}, {"logprob", t.logprob}, {"bytes", bytes_of(p)}});
    }
    j_["content"].push_back(
        json{{"token", piece}, {"logprob", lp->logprob}, {"bytes", bytes_of(piece)}, {"top_logprobs", top}});
    return;
  }
  j_["tokens"].push_back(piece);
  j_["text_offset"].push_back(std::max<int64_t>(offset_, 0));
  offset_ += static_cast<int64_t>(tok_.token_to_piece(id, /*special=*/false).size());  // what the text holds
  if (!lp) {
    j_["token_logprobs"].push_back(nullptr);
    j_["top_logprobs"].push_back(nullptr);
    return;
  }
  j_["token_logprobs"].push_back(lp->logprob);
  json top = json::object();
  for (const TopLogprob& t : lp->top) {
    const std::string p = tok_.token_to_piece(t.id, true);
    if (!top.contains(p)) top[p] = t.logprob;  // two ids with one piece: the likelier one
  }
  j_["top_logprobs"].push_back(top);
}

void LogprobsJson::add_unscored(int32_t id, size_t lead) {
  offset_ -= static_cast<int64_t>(lead);
  add_token(id, nullptr);
}

void LogprobsJson::add(std::span<const TokenLogprob> entries) {
  for (const TokenLogprob& e : entries) add_token(e.id, &e);
}

json LogprobsJson::take() {
  json out = std::move(j_);
  clear();
  return out;
}

}  // namespace strata::server
