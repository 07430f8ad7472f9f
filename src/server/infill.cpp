// llama-server's /infill request (server/openai_api.h parse_infill_request).
#include <nlohmann/json.hpp>

#include "server/openai_api.h"

namespace strata::server {

using nlohmann::json;

Result<ApiRequest> parse_infill_request(const std::string& text) {
  json body = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return err("request body is not valid JSON");
  if (!body.is_object()) return err("request body must be a JSON object, got %s", body.type_name());
  FimInput fim;
  auto str = [&](const char* key, std::string* out) -> Status {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) return {};
    if (!it->is_string()) return err("'%s' must be a string, got %s", key, it->type_name());
    *out = it->get<std::string>();
    return {};
  };
  std::string prefix;
  STRATA_TRY(str("input_prefix", &prefix));
  STRATA_TRY(str("input_suffix", &fim.suffix));
  STRATA_TRY(str("prompt", &fim.middle));
  if (auto ex = body.find("input_extra"); ex != body.end() && !ex->is_null()) {
    if (!ex->is_array())
      return err("'input_extra' must be an array of {text, filename}, got %s", ex->type_name());
    for (size_t i = 0; i < ex->size(); ++i) {
      const json& c = (*ex)[i];
      if (!c.is_object()) return err("'input_extra'[%zu] must be an object {text, filename}", i);
      FimChunk chunk;
      for (const char* k : {"text", "filename"}) {
        auto it = c.find(k);
        if (it == c.end() || it->is_null()) continue;
        if (!it->is_string())
          return err("'input_extra'[%zu].%s must be a string, got %s", i, k, it->type_name());
        (std::string(k) == "text" ? chunk.text : chunk.filename) = it->get<std::string>();
      }
      fim.extra.push_back(std::move(chunk));
    }
  }
  for (const char* k : {"input_prefix", "input_suffix", "input_extra", "suffix"}) body.erase(k);
  body["prompt"] = prefix;
  STRATA_ASSIGN(ApiRequest r, parse_request(body.dump(), /*chat=*/false));
  if (r.n != 1) return err("'n' must be 1 on /infill, got %d", r.n);
  if (r.echo) return err("'echo' is not supported on /infill");
  r.fim = std::move(fim);
  r.native = true;
  return r;
}

}  // namespace strata::server
