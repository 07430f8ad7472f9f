#include "text/tokenizer_json_writer.h"

#include <nlohmann/json.hpp>

#include "text/pre_tokenizer.h"

namespace strata::text {

Result<std::string> to_tokenizer_json(const VocabData& d) {
  using nlohmann::json;
  if (d.model != "gpt2")
    return err(
        "only byte-level BPE vocabs (tokenizer.ggml.model 'gpt2') can be written as tokenizer.json, got '%s'",
        d.model.c_str());
  STRATA_ASSIGN(const PreTokenizerInfo info, pre_tokenizer_info(d.pre.empty() ? "default" : d.pre));
  VocabData copy = d;
  STRATA_ASSIGN(Vocab v, Vocab::build(copy));  // validates, fills empty texts
  const auto type_of = [&](size_t id) {
    return d.token_types.empty() ? TokenType::normal : static_cast<TokenType>(d.token_types[id]);
  };

  json vocab = json::object();
  json added = json::array();
  for (size_t id = 0; id < v.text.size(); ++id) {
    vocab[v.text[id]] = id;
    const TokenType t = type_of(id);
    if (t == TokenType::control || t == TokenType::unknown || t == TokenType::user_defined) {
      added.push_back({{"id", id},
                       {"content", v.text[id]},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", t != TokenType::user_defined}});
    }
  }
  json merges = json::array();
  std::string joined;
  for (size_t i = 0; i < d.merges.size(); ++i) {
    const std::string& m = d.merges[i];
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos)
      return err("tokenizer.ggml.merges[%zu] = '%s' is not 'left right'", i, m.c_str());
    joined = m.substr(0, sp) + m.substr(sp + 1);
    if (v.find(joined) < 0) continue;  // never applies (the GGUF path skips it too); HF rejects it
    merges.push_back(m);
  }

  json steps = json::array();
  for (const std::string& r : info.regexes) {
    steps.push_back(
        {{"type", "Split"}, {"pattern", {{"Regex", r}}}, {"behavior", "Isolated"}, {"invert", false}});
  }
  steps.push_back(
      {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}});

  json post = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  const bool add_bos = d.add_bos.value_or(info.add_bos);
  if (add_bos) {
    if (!d.bos_id || *d.bos_id < 0 || *d.bos_id >= v.n())
      return err("the vocab adds BOS but has no valid tokenizer.ggml.bos_token_id");
    const std::string& bos = v.text[*d.bos_id];
    post = {
        {"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair",
         {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
          {{"SpecialToken", {{"id", bos}, {"type_id", 1}}}},
          {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
        {"special_tokens", {{bos, {{"id", bos}, {"ids", {*d.bos_id}}, {"tokens", {bos}}}}}}};
  }

  json out;
  out["version"] = "1.0";
  out["truncation"] = nullptr;
  out["padding"] = nullptr;
  out["added_tokens"] = std::move(added);
  out["normalizer"] = nullptr;
  out["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", std::move(steps)}};
  out["post_processor"] = std::move(post);
  out["decoder"] = {
      {"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  out["model"] = {{"type", "BPE"},
                  {"dropout", nullptr},
                  {"unk_token", nullptr},
                  {"continuing_subword_prefix", nullptr},
                  {"end_of_word_suffix", nullptr},
                  {"fuse_unk", false},
                  {"byte_fallback", false},
                  {"ignore_merges", info.ignore_merges},
                  {"vocab", std::move(vocab)},
                  {"merges", std::move(merges)}};
  return out.dump(1, ' ', false, json::error_handler_t::strict);
}

}  // namespace strata::text
