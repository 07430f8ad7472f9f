#include "runtime/profile.h"

namespace strata {

Result<Profile> parse_profile(std::string_view name) {
  if (name == "accurate") return Profile::accurate;
  if (name == "fast") return Profile::fast;
  return err("unknown profile \"%.*s\" (choices: accurate, fast)", static_cast<int>(name.size()),
             name.data());
}

const char* profile_name(Profile p) {
  return p == Profile::fast ? "fast" : "accurate";
}

SeqKnobs profile_knobs(Profile p) {
  SeqKnobs k;
  if (p == Profile::fast) {
    k.expert_min_share = 0.7f;
    k.index_topk_share = 0.5f;
  }
  return k;
}

std::string profile_description(Profile p) {
  if (p == Profile::fast)
    return "fast: routed experts weighing less than 0.7 of a token's mean choice are skipped (the heaviest "
           "always runs; kept weights rescaled); DeepSeek sparse attention keeps half the model's indexer "
           "top-k";
  return "accurate: no approximation (bit-identical to no profile)";
}

}  // namespace strata
