// Tokenizer::from_json_file / from_json: a Hugging Face tokenizer.json whose model is BPE over a
// ByteLevel pre-tokenizer, run by the byte-level BPE engine of bpe.cpp with HF's rules
// (BpeOptions: HF regex dialect, unknown-byte handling, ByteLevel's add_prefix_space).
//
// Read from the file: model (BPE: vocab, merges as "a b" or ["a", "b"], unk_token, byte_fallback,
// fuse_unk, ignore_merges), added_tokens (special -> control, else user-defined; lstrip / rstrip),
// normalizer (none, NFC, Sequence; applied to the text between added tokens), pre_tokenizer (Sequence of
// Split "Isolated" regex or string patterns, Digits, ByteLevel last), post_processor (TemplateProcessing's
// BOS / EOS, ByteLevel) and decoder (ByteLevel). A tokenizer_config.json beside the file gives bos / eos /
// unk / pad and add_bos_token / add_eos_token, as transformers reads them. Anything else is an
// error naming the file and the field.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>

#include "format/safetensors_dir.h"
#include "text/bpe.h"
#include "text/tokenizer.h"

namespace strata {
namespace {

using nlohmann::json;

// HF ByteLevel's own split (use_regex = true): GPT-2's pattern with a final \s+.
constexpr const char* kByteLevelRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct Parser {
  std::string file;  // named in every error

  Error bad(const std::string& field, const std::string& what) const {
    return err("%s: %s: %s", file.c_str(), field.c_str(), what.c_str());
  }
  // j[key] when present and not null, else nullptr.
  static const json* get(const json& j, const char* key) {
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  }
  Result<bool> flag(const json& j, const char* key, const std::string& where, bool dflt) const {
    const json* v = get(j, key);
    if (!v) return dflt;
    if (!v->is_boolean()) return bad(where.empty() ? key : where + "." + key, "is not true / false");
    return v->get<bool>();
  }
  Result<std::string> type_of(const json& j, const std::string& where) const {
    if (!j.is_object()) return bad(where, "is not an object");
    const json* t = get(j, "type");
    if (!t || !t->is_string()) return bad(where + ".type", "is missing or not a string");
    return t->get<std::string>();
  }
};

// A Split "String" pattern as a regex matching that text literally.
std::string literal_regex(const std::string& s) {
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u) && c != ' ') out += '\\';
    out += c;
  }
  return out;
}

struct PreSteps {
  std::vector<std::string> regexes;
  bool byte_level = false;
  bool add_prefix_space = false;
};

Status read_pre_tokenizer(const Parser& p, const json& j, const std::string& where, PreSteps* s) {
  STRATA_ASSIGN(const std::string type, p.type_of(j, where));
  if (s->byte_level) return p.bad(where, "a '" + type + "' step after ByteLevel is not supported");
  if (type == "Sequence") {
    const json* list = Parser::get(j, "pretokenizers");
    if (!list || !list->is_array()) return p.bad(where + ".pretokenizers", "is missing or not an array");
    for (size_t i = 0; i < list->size(); ++i) {
      STRATA_TRY(read_pre_tokenizer(p, (*list)[i], where + ".pretokenizers[" + std::to_string(i) + "]", s));
    }
    return {};
  }
  if (type == "Split") {
    STRATA_ASSIGN(const bool invert, p.flag(j, "invert", where, false));
    if (invert) return p.bad(where + ".invert", "true is not supported");
    const json* behavior = Parser::get(j, "behavior");
    if (!behavior || !behavior->is_string() || behavior->get<std::string>() != "Isolated")
      return p.bad(where + ".behavior",
                   "only \"Isolated\" is supported, got " + (behavior ? behavior->dump() : "none"));
    const json* pat = Parser::get(j, "pattern");
    const json* re = pat && pat->is_object() ? Parser::get(*pat, "Regex") : nullptr;
    const json* str = pat && pat->is_object() ? Parser::get(*pat, "String") : nullptr;
    if (re && re->is_string()) {
      s->regexes.push_back(re->get<std::string>());
    } else if (str && str->is_string()) {
      s->regexes.push_back(literal_regex(str->get<std::string>()));
    } else {
      return p.bad(where + ".pattern", "needs {\"Regex\": ...} or {\"String\": ...}");
    }
    return {};
  }
  if (type == "Digits") {
    STRATA_ASSIGN(const bool each, p.flag(j, "individual_digits", where, false));
    s->regexes.emplace_back(each ? R"(\p{N})" : R"(\p{N}+)");
    return {};
  }
  if (type == "ByteLevel") {
    STRATA_ASSIGN(const bool use_regex, p.flag(j, "use_regex", where, true));
    STRATA_ASSIGN(s->add_prefix_space, p.flag(j, "add_prefix_space", where, true));
    // HF adds the space to every piece split so far; strata adds it to each text fragment.
    if (s->add_prefix_space && !s->regexes.empty())
      return p.bad(where + ".add_prefix_space", "true after Split / Digits steps is not supported");
    if (use_regex) s->regexes.emplace_back(kByteLevelRegex);
    s->byte_level = true;
    return {};
  }
  return p.bad(where + ".type", "'" + type + "' is not supported (Sequence, Split, Digits, ByteLevel)");
}

// Supported: none, NFC, and Sequences of those (*nfc set when any NFC is present).
Status read_normalizer(const Parser& p, const json* j, const std::string& where, bool* nfc) {
  if (!j) return {};
  STRATA_ASSIGN(const std::string type, p.type_of(*j, where));
  if (type == "NFC") {
    *nfc = true;
    return {};
  }
  if (type != "Sequence") return p.bad(where + ".type", "'" + type + "' is not supported (NFC, Sequence)");
  const json* list = Parser::get(*j, "normalizers");
  if (!list || !list->is_array()) return p.bad(where + ".normalizers", "is missing or not an array");
  for (size_t i = 0; i < list->size(); ++i) {
    STRATA_TRY(read_normalizer(p, &(*list)[i], where + ".normalizers[" + std::to_string(i) + "]", nfc));
  }
  return {};
}

struct Specials {
  std::string bos, eos;  // token texts the post-processor adds ("" = none)
};

Status read_post_processor(const Parser& p, const json* j, const std::string& where, Specials* out) {
  if (!j) return {};
  STRATA_ASSIGN(const std::string type, p.type_of(*j, where));
  if (type == "ByteLevel") return {};
  if (type == "Sequence") {
    const json* list = Parser::get(*j, "processors");
    if (!list || !list->is_array()) return p.bad(where + ".processors", "is missing or not an array");
    for (size_t i = 0; i < list->size(); ++i) {
      STRATA_TRY(read_post_processor(p, &(*list)[i], where + ".processors[" + std::to_string(i) + "]", out));
    }
    return {};
  }
  if (type != "TemplateProcessing")
    return p.bad(where + ".type",
                 "'" + type + "' is not supported (TemplateProcessing, ByteLevel, Sequence)");
  const json* single = Parser::get(*j, "single");
  if (!single || !single->is_array()) return p.bad(where + ".single", "is missing or not an array");
  bool seen_a = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const json& item = (*single)[i];
    const std::string at = where + ".single[" + std::to_string(i) + "]";
    const json* seq = item.is_object() ? Parser::get(item, "Sequence") : nullptr;
    const json* sp = item.is_object() ? Parser::get(item, "SpecialToken") : nullptr;
    if (seq) {
      if (seen_a) return p.bad(at, "a second Sequence is not supported");
      seen_a = true;
    } else if (sp && sp->is_object() && Parser::get(*sp, "id") && (*sp)["id"].is_string()) {
      std::string& slot = seen_a ? out->eos : out->bos;
      if (!slot.empty()) return p.bad(at, "more than one special token on one side is not supported");
      slot = (*sp)["id"].get<std::string>();
    } else {
      return p.bad(at, "is neither {\"Sequence\": ...} nor {\"SpecialToken\": {\"id\": ...}}");
    }
  }
  if (!seen_a) return p.bad(where + ".single", "has no Sequence");
  // special_tokens maps the template's names to token texts (usually the same text).
  for (std::string* name : {&out->bos, &out->eos}) {
    if (name->empty()) continue;
    const json* st = Parser::get(*j, "special_tokens");
    const json* entry = st && st->is_object() ? Parser::get(*st, name->c_str()) : nullptr;
    const json* toks = entry && entry->is_object() ? Parser::get(*entry, "tokens") : nullptr;
    if (toks && toks->is_array() && toks->size() == 1 && (*toks)[0].is_string())
      *name = (*toks)[0].get<std::string>();
  }
  return {};
}

// A token named in tokenizer_config.json: "text" or {"content": "text", ...}; "" when absent.
Result<std::string> config_token(const Parser& p, const json& cfg, const char* key) {
  const json* v = Parser::get(cfg, key);
  if (!v) return std::string();
  if (v->is_string()) return v->get<std::string>();
  const json* c = v->is_object() ? Parser::get(*v, "content") : nullptr;
  if (c && c->is_string()) return c->get<std::string>();
  return p.bad(key, "is neither a string nor {\"content\": ...}");
}

Result<json> parse_json(const Parser& p, std::string_view text) {
  try {
    json j = json::parse(text.begin(), text.end());
    if (!j.is_object()) return p.bad("(top level)", "is not a JSON object");
    return j;
  } catch (const json::exception& e) {
    return err("%s: not valid JSON: %s", p.file.c_str(), e.what());
  }
}

Result<std::unique_ptr<Tokenizer>> load(const Parser& p, std::string_view text, const Parser& cp,
                                        std::string_view config_text) {
  STRATA_ASSIGN(const json j, parse_json(p, text));
  const json* model = Parser::get(j, "model");
  if (!model) return p.bad("model", "is missing");
  STRATA_ASSIGN(const std::string mtype, p.type_of(*model, "model"));
  if (mtype != "BPE") return p.bad("model.type", "'" + mtype + "' is not supported (only byte-level BPE)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json* v = Parser::get(*model, key);
    if (v && !(v->is_string() && v->get<std::string>().empty()))
      return p.bad(std::string("model.") + key, "is not supported (only null)");
  }
  if (const json* d = Parser::get(*model, "dropout"); d && !(d->is_number() && d->get<double>() == 0.0))
    return p.bad("model.dropout", "is not supported (only null)");

  text::BpeOptions opt;
  opt.pre.name = "tokenizer.json";
  opt.dialect = text::RegexDialect::huggingface;
  opt.hf_unknown = true;
  STRATA_ASSIGN(opt.byte_fallback, p.flag(*model, "byte_fallback", "model", false));
  STRATA_ASSIGN(opt.fuse_unk, p.flag(*model, "fuse_unk", "model", false));
  STRATA_ASSIGN(opt.pre.ignore_merges, p.flag(*model, "ignore_merges", "model", false));

  // Token texts by id: model.vocab, then added_tokens (which may repeat vocab entries).
  const json* vocab = Parser::get(*model, "vocab");
  if (!vocab || !vocab->is_object()) return p.bad("model.vocab", "is missing or not an object");
  std::vector<std::string> texts;
  std::vector<int32_t> types;
  // Ids may leave holes, but not so many that a bad id makes us allocate gigabytes.
  const json* added = Parser::get(j, "added_tokens");
  const int64_t max_id =
      4 * static_cast<int64_t>(vocab->size() + (added && added->is_array() ? added->size() : 0)) + 1024;
  auto place = [&](int64_t id, const std::string& s, int32_t type, const std::string& field) -> Status {
    if (id < 0 || id >= max_id)
      return p.bad(field,
                   "id " + std::to_string(id) + " is out of range (0.." + std::to_string(max_id - 1) + ")");
    if (static_cast<size_t>(id) >= texts.size()) {
      texts.resize(id + 1);
      types.resize(id + 1, static_cast<int32_t>(text::TokenType::unused));
    }
    if (!texts[id].empty() && texts[id] != s)
      return p.bad(field, "id " + std::to_string(id) + " is '" + s + "' but already '" + texts[id] + "'");
    if (s.empty()) return p.bad(field, "an empty token text is not supported");
    texts[id] = s;
    types[id] = type;
    return {};
  };
  std::unordered_map<std::string_view, int32_t> ids;  // into vocab's keys (j outlives it)
  ids.reserve(vocab->size() * 2);
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it.value().is_number_integer())
      return p.bad("model.vocab[\"" + it.key() + "\"]", "is not an integer id");
    const int64_t id = it.value().get<int64_t>();
    STRATA_TRY(place(id, it.key(), static_cast<int32_t>(text::TokenType::normal),
                     "model.vocab[\"" + it.key() + "\"]"));
    if (!ids.emplace(it.key(), static_cast<int32_t>(id)).second)
      return p.bad("model.vocab", "'" + it.key() + "' appears twice");
  }
  if (texts.empty()) return p.bad("model.vocab", "is empty");
  std::vector<std::pair<int32_t, uint8_t>> strips;
  if (added) {
    if (!added->is_array()) return p.bad("added_tokens", "is not an array");
    for (size_t i = 0; i < added->size(); ++i) {
      const json& a = (*added)[i];
      const std::string at = "added_tokens[" + std::to_string(i) + "]";
      const json* id = a.is_object() ? Parser::get(a, "id") : nullptr;
      const json* content = a.is_object() ? Parser::get(a, "content") : nullptr;
      if (!id || !id->is_number_integer() || !content || !content->is_string())
        return p.bad(at, "needs an integer id and a string content");
      STRATA_ASSIGN(const bool special, p.flag(a, "special", at, false));
      STRATA_ASSIGN(const bool single_word, p.flag(a, "single_word", at, false));
      STRATA_ASSIGN(const bool lstrip, p.flag(a, "lstrip", at, false));
      STRATA_ASSIGN(const bool rstrip, p.flag(a, "rstrip", at, false));
      if (single_word) return p.bad(at + ".single_word", "true is not supported");
      const auto type = special ? text::TokenType::control : text::TokenType::user_defined;
      STRATA_TRY(place(id->get<int64_t>(), content->get<std::string>(), static_cast<int32_t>(type), at));
      if (lstrip || rstrip)
        strips.emplace_back(id->get<int32_t>(),
                            (lstrip ? text::kStripLeft : 0) | (rstrip ? text::kStripRight : 0));
    }
  }
  for (size_t id = 0; id < texts.size(); ++id) {
    if (texts[id].empty()) texts[id] = "[EMPTY_" + std::to_string(id) + "]";  // no token has this id
  }

  STRATA_TRY(read_normalizer(p, Parser::get(j, "normalizer"), "normalizer", &opt.nfc));
  PreSteps steps;
  const json* pre = Parser::get(j, "pre_tokenizer");
  if (!pre) return p.bad("pre_tokenizer", "is missing (byte-level BPE needs a ByteLevel step)");
  STRATA_TRY(read_pre_tokenizer(p, *pre, "pre_tokenizer", &steps));
  if (!steps.byte_level)
    return p.bad("pre_tokenizer", "has no ByteLevel step (only byte-level BPE is supported)");
  opt.pre.regexes = std::move(steps.regexes);
  opt.add_prefix_space = steps.add_prefix_space;
  if (const json* dec = Parser::get(j, "decoder")) {
    STRATA_ASSIGN(const std::string dtype, p.type_of(*dec, "decoder"));
    if (dtype != "ByteLevel")
      return p.bad("decoder.type", "'" + dtype + "' is not supported (only ByteLevel)");
  }
  Specials sp;
  STRATA_TRY(read_post_processor(p, Parser::get(j, "post_processor"), "post_processor", &sp));

  text::VocabData d;
  d.model = "gpt2";
  d.pre = "tokenizer.json";
  auto id_of = [&](const Parser& pp, const std::string& t, const std::string& field) -> Result<int64_t> {
    for (size_t id = 0; id < texts.size(); ++id) {
      if (texts[id] == t) return static_cast<int64_t>(id);
    }
    return pp.bad(field, "token '" + t + "' is not in the vocabulary");
  };
  if (const json* unk = Parser::get(*model, "unk_token")) {
    if (!unk->is_string()) return p.bad("model.unk_token", "is not a string");
    STRATA_ASSIGN(d.unk_id, id_of(p, unk->get<std::string>(), "model.unk_token"));
  }
  if (!sp.bos.empty()) {
    STRATA_ASSIGN(d.bos_id, id_of(p, sp.bos, "post_processor"));
    d.add_bos = true;
  }
  if (!sp.eos.empty()) {
    STRATA_ASSIGN(d.eos_id, id_of(p, sp.eos, "post_processor"));
    d.add_eos = true;
  }
  if (!config_text.empty()) {
    STRATA_ASSIGN(const json cfg, parse_json(cp, config_text));
    const std::pair<const char*, std::optional<int64_t>*> named[] = {{"bos_token", &d.bos_id},
                                                                     {"eos_token", &d.eos_id},
                                                                     {"unk_token", &d.unk_id},
                                                                     {"pad_token", &d.pad_id}};
    for (const auto& [key, slot] : named) {
      STRATA_ASSIGN(const std::string t, config_token(cp, cfg, key));
      if (!t.empty()) {
        STRATA_ASSIGN(*slot, id_of(cp, t, key));
      }
    }
    for (const auto& [key, slot] :
         {std::pair{"add_bos_token", &d.add_bos}, std::pair{"add_eos_token", &d.add_eos}}) {
      if (!Parser::get(cfg, key)) continue;
      STRATA_ASSIGN(*slot, cp.flag(cfg, key, "", false));
    }
  }

  // Merges: both halves must be tokens and so must their concatenation (as HF checks).
  const json* merges = Parser::get(*model, "merges");
  if (!merges || !merges->is_array() || merges->empty()) return p.bad("model.merges", "is missing or empty");
  d.merges.reserve(merges->size());
  std::string joined;
  for (size_t i = 0; i < merges->size(); ++i) {
    const json& m = (*merges)[i];
    const std::string at = "model.merges[" + std::to_string(i) + "]";
    std::string left, right;
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      const size_t sp_at = s.find(' ', 1);
      if (sp_at == std::string::npos) return p.bad(at, "'" + s + "' is not of the form 'left right'");
      left = s.substr(0, sp_at);
      right = s.substr(sp_at + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
      if (left.find(' ', 1) != std::string::npos)
        return p.bad(at, "a left half with a space ('" + left + "') is not supported");
    } else {
      return p.bad(at, "is neither \"left right\" nor [\"left\", \"right\"]");
    }
    joined = left + right;
    for (const std::string* t : {&left, &right, &joined}) {
      if (!ids.count(*t)) return p.bad(at, "'" + *t + "' is not in model.vocab");
    }
    d.merges.push_back(left + " " + right);
  }

  d.leftmost_longest = true;
  d.tokens = std::move(texts);
  d.token_types = std::move(types);
  if (!strips.empty()) {
    d.token_strip.assign(d.tokens.size(), 0);
    for (const auto& [id, bits] : strips) d.token_strip[id] = bits;
  }
  auto tok = text::BpeTokenizer::create(std::move(d), std::move(opt));
  if (!tok.ok()) return err_context(p.file, tok.error());
  return std::unique_ptr<Tokenizer>(std::move(tok).value());
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_json(std::string_view tokenizer_json,
                                                        std::string_view config_json, const std::string& name,
                                                        const std::string& config_name) {
  return load(Parser{name}, tokenizer_json, Parser{config_name}, config_json);
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_json_file(const std::string& path) {
  STRATA_ASSIGN(const std::string text, read_text_file(path, size_t{1} << 30));
  const std::string cfg_path = (std::filesystem::path(path).parent_path() / "tokenizer_config.json").string();
  std::string cfg;
  std::error_code ec;
  if (std::filesystem::is_regular_file(cfg_path, ec)) {
    STRATA_ASSIGN(cfg, read_text_file(cfg_path));
  }
  return from_json(text, cfg, path, cfg_path);
}

}  // namespace strata
