// Request profiles: a named set of per-sequence knobs (model/arch.h SeqKnobs) that trade a
// measured amount of accuracy for speed, chosen per request ("profile" in the server's JSON, the
// server's --profile default, --profile in run / bench / kld / perplexity). Only per-sequence
// knobs belong here, so one request's profile never changes another's bits; engine-wide settings
// (KV types, budgets, threads) stay flags.
//   accurate  nothing changed: bit-identical to running without a profile (the default).
//   fast      routed experts whose router weight is below 0.7 of the mean weight of a token's
//             choices (SeqKnobs::expert_min_share 0.7) are not run; the token's heaviest expert
//             always is; the kept weights are rescaled to the routing's total. DeepSeek sparse
//             attention (deepseek4, deepseek_v41) attends half the model's indexer top-k compressed entries
//             per query (SeqKnobs::index_topk_share 0.5, rounded up): it changes only queries that see more
//             entries than that (past 2 x top-k tokens: one entry per 4 tokens). Dense models are unchanged
//             by it.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "model/arch.h"

namespace strata {

enum class Profile { accurate, fast };

Result<Profile> parse_profile(std::string_view name);  // error names the value and the choices
const char* profile_name(Profile p);
SeqKnobs profile_knobs(Profile p);
// One line saying what the profile changes (CLI banners, the server's /props).
std::string profile_description(Profile p);

}  // namespace strata
