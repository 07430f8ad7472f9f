#include "runtime/stop_strings.h"

#include <algorithm>

namespace strata {

StopStrings::StopStrings(std::vector<std::string> stops) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

bool StopStrings::push(std::string_view text, std::string* out) {
  if (stopped_) return true;
  held_.append(text);
  // The earliest complete match wins (ties: the longest stop string).
  size_t best = std::string::npos;
  for (const auto& s : stops_) {
    const size_t at = held_.find(s);
    if (at == std::string::npos) continue;
    if (at < best || (at == best && s.size() > matched_.size())) {
      best = at;
      matched_ = s;
    }
  }
  if (best != std::string::npos) {
    out->append(held_, 0, best);
    held_.clear();
    stopped_ = true;
    return true;
  }
  // Hold back the longest tail of held_ that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const auto& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, held_.size());
    for (size_t len = max_len; len > keep; --len)
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
  }
  out->append(held_, 0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return false;
}

void StopStrings::flush(std::string* out) {
  if (!stopped_) out->append(held_);
  held_.clear();
}

}  // namespace strata
