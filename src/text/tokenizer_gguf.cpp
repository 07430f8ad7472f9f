// Tokenizer::from_gguf: reads tokenizer.ggml.* into VocabData (kept apart from the algorithms
// so they can be built and tested from plain data).
#include "text/tokenizer.h"

namespace strata {
namespace {

Status read_opt_int(const GgufFile& f, const char* key, std::optional<int64_t>* out) {
  if (!f.find(key)) return {};
  STRATA_ASSIGN(*out, f.get_int(key));
  return {};
}

Status read_opt_bool(const GgufFile& f, const char* key, std::optional<bool>* out) {
  if (!f.find(key)) return {};
  STRATA_ASSIGN(*out, f.get_bool(key));
  return {};
}

}  // namespace

Result<text::VocabData> read_vocab_data(const GgufFile& f) {
  text::VocabData d;
  STRATA_ASSIGN(d.model, f.get_string("tokenizer.ggml.model"));
  STRATA_ASSIGN(d.pre, f.get_string_or("tokenizer.ggml.pre", ""));
  STRATA_ASSIGN(d.tokens, f.get_string_array("tokenizer.ggml.tokens"));
  if (f.find("tokenizer.ggml.scores")) {
    STRATA_ASSIGN(d.scores, f.get_float_array("tokenizer.ggml.scores"));
  }
  if (f.find("tokenizer.ggml.token_type")) {
    STRATA_ASSIGN(std::vector<int64_t> types, f.get_int_array("tokenizer.ggml.token_type"));
    d.token_types.assign(types.begin(), types.end());
  }
  if (f.find("tokenizer.ggml.merges")) {
    STRATA_ASSIGN(d.merges, f.get_string_array("tokenizer.ggml.merges"));
  }
  STRATA_TRY(read_opt_int(f, "tokenizer.ggml.bos_token_id", &d.bos_id));
  STRATA_TRY(read_opt_int(f, "tokenizer.ggml.eos_token_id", &d.eos_id));
  STRATA_TRY(read_opt_int(f, "tokenizer.ggml.eot_token_id", &d.eot_id));
  STRATA_TRY(read_opt_int(f, "tokenizer.ggml.eom_token_id", &d.eom_id));
  STRATA_TRY(read_opt_int(f, "tokenizer.ggml.unknown_token_id", &d.unk_id));
  STRATA_TRY(read_opt_int(f, "tokenizer.ggml.padding_token_id", &d.pad_id));
  STRATA_TRY(read_opt_int(f, "tokenizer.ggml.fim_pre_token_id", &d.fim_pre_id));
  STRATA_TRY(read_opt_int(f, "tokenizer.ggml.fim_suf_token_id", &d.fim_suf_id));
  STRATA_TRY(read_opt_int(f, "tokenizer.ggml.fim_mid_token_id", &d.fim_mid_id));
  STRATA_TRY(read_opt_int(f, "tokenizer.ggml.fim_pad_token_id", &d.fim_pad_id));
  STRATA_TRY(read_opt_int(f, "tokenizer.ggml.fim_rep_token_id", &d.fim_rep_id));
  STRATA_TRY(read_opt_int(f, "tokenizer.ggml.fim_sep_token_id", &d.fim_sep_id));
  STRATA_TRY(read_opt_bool(f, "tokenizer.ggml.add_bos_token", &d.add_bos));
  STRATA_TRY(read_opt_bool(f, "tokenizer.ggml.add_eos_token", &d.add_eos));
  STRATA_TRY(read_opt_bool(f, "tokenizer.ggml.add_space_prefix", &d.add_space_prefix));
  return d;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const GgufFile& file) {
  auto data = read_vocab_data(file);
  if (!data.ok()) return err_context("tokenizer of " + file.path(), data.error());
  auto tok = from_data(std::move(data).value());
  if (!tok.ok()) return err_context("tokenizer of " + file.path(), tok.error());
  return tok;
}

}  // namespace strata
