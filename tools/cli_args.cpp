#include "cli_args.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "base/units.h"
#include "runtime/profile.h"

namespace strata::cli {

std::optional<int> parse_args(CLI::App& app, int argc, char** argv, const char* cmd) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (auto& a : args) {  // llama.cpp's two-letter spellings
    if (a == "-np") a = "--parallel";
    if (a == "-ub") a = "--ubatch-size";
    if (a == "-to") a = "--timeout";
    if (a == "-npl") a = "--npl";
    if (a == "-npp") a = "--npp";
    if (a == "-ntg") a = "--ntg";
    if (a == "-dev") a = "--device";
    if (a == "-ctk") a = "--cache-type-k";
    if (a == "-ctv") a = "--cache-type-v";
    if (a == "-ot") a = "--override-tensor";
    if (a == "-cram") a = "--cache-ram";
    if (a == "-ctxcp") a = "--ctx-checkpoints";
  }
  std::reverse(args.begin(), args.end());  // CLI11 parses a vector from its back
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::Success&) {  // --list-devices printed them
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "strata %s: error: %s\n", cmd, e.what());
    return 2;
  }
  return std::nullopt;
}

Result<int> parse_ctx(const std::string& text) {
  auto c = parse_size(text);
  if (!c.ok()) return err("-c: %s", c.message().c_str());
  if (*c > (1u << 24)) return err("-c %s is too large", text.c_str());
  return static_cast<int>(*c);
}

void add_kv_type_flags(CLI::App& app, KvTypeFlags& f, const char* default_type) {
  const std::string names = kv_supported_names();
  app.add_option("--cache-type-k", f.k,
                 "-ctk: KV type of K rows (" + names + "; default " + default_type +
                     "; none asked: deepseek4 keeps f32, deepseek_v41 the reference's own types)");
  app.add_option("--cache-type-v", f.v,
                 "-ctv: KV type of V rows (" + names + "; default " + default_type + ")");
  app.add_option("--kv-type", f.both, "KV type of K and V rows (-ctk / -ctv win over it)");
  app.add_option("--kv-type-index", f.index,
                 "KV type of DeepSeek's indexer keys (" + names + "; default: the -ctk type)");
  app.add_option("--kv-rotate", f.rotate, "on|off: Hadamard-rotate quantized K / V rows (as llama.cpp)")
      ->capture_default_str();
}

Result<KvTypes> kv_types(const KvTypeFlags& f, const char* default_type, bool planned) {
  KvTypes t;
  const std::string both = f.both.empty() ? default_type : f.both;
  STRATA_ASSIGN(t.k, kv_type_from_name(f.k.empty() ? both : f.k, planned));
  STRATA_ASSIGN(t.v, kv_type_from_name(f.v.empty() ? both : f.v, planned));
  if (f.rotate != "on" && f.rotate != "off")
    return err("--kv-rotate %s: expected on or off", f.rotate.c_str());
  t.rotate = f.rotate == "on";
  t.is_default = f.k.empty() && f.v.empty() && f.both.empty();
  t.v_asked = !f.v.empty();
  if (!f.index.empty()) {
    STRATA_ASSIGN(t.index, kv_type_from_name(f.index, planned));
    t.has_index = true;
  }
  return t;
}

std::string kv_types_note(const KvSpec& spec, const KvTypes& t, const char* arch) {
  if (!t.v_asked) return "";
  for (const KvLayerSpec& l : spec.layers)
    for (const KvPartSpec& p : l.parts)
      if (p.name == "v") return "";
  return std::string("note: ") + arch + " keeps one row per key (K = V): -ctv " + kv_type_name(t.v) +
         " is ignored; the rows are -ctk's type\n";
}

void add_profile_flags(CLI::App& app, ProfileFlags& f) {
  app.add_option(
         "--profile", f.profile,
         "accurate | fast: per-sequence speed / accuracy trade (fast skips routed experts weighing "
         "less than 0.7 of a token's mean choice and keeps half of DeepSeek sparse attention's top-k)")
      ->capture_default_str();
  app.add_option("--expert-min-share", f.expert_min_share,
                 "skip routed experts weighing less than this share of a token's mean choice (the heaviest "
                 "always runs; 0: off; wins over --profile)");
  app.add_option(
      "--index-topk-share", f.index_topk_share,
      "DeepSeek sparse attention keeps this share of the model's indexer top-k (0 or 1: all of it; "
      "wins over --profile)");
}

Result<SeqKnobs> seq_knobs(const ProfileFlags& f) {
  STRATA_ASSIGN(Profile p, parse_profile(f.profile));
  SeqKnobs k = profile_knobs(p);
  if (f.expert_min_share >= 0.0f) {
    if (!(f.expert_min_share <= 1.0f)) return err("--expert-min-share %g: expected 0..1", f.expert_min_share);
    k.expert_min_share = f.expert_min_share;
  }
  if (f.index_topk_share >= 0.0f) {
    if (!(f.index_topk_share <= 1.0f)) return err("--index-topk-share %g: expected 0..1", f.index_topk_share);
    k.index_topk_share = f.index_topk_share;
  }
  return k;
}

}  // namespace strata::cli
