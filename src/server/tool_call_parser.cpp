// ToolCallParser: a model's reply split into content and tool calls (server/tool_calls.h).
#include <algorithm>
#include <utility>

#include "server/tool_calls.h"

namespace strata::server {

using ojson = nlohmann::ordered_json;

namespace {

constexpr std::string_view kDsml = "｜DSML｜";

bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ws(s.back())) s.remove_suffix(1);
  return s;
}

std::string compact(const ojson& j) {
  return j.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

// `{"name": "f", "arguments": {...}}` (arguments may also be given as a JSON string).
bool parse_hermes(std::string_view body, std::vector<ToolCall>* out) {
  const ojson j = ojson::parse(trim(body), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  ToolCall c{j["name"].get<std::string>(), "{}"};
  if (auto a = j.find("arguments"); a != j.end() && !a->is_null()) {
    if (a->is_string()) {
      if (ojson::parse(a->get<std::string>(), nullptr, false).is_discarded()) return false;
      c.arguments = a->get<std::string>();
    } else {
      c.arguments = compact(*a);
    }
  }
  out->push_back(std::move(c));
  return true;
}

// Consumes `tag` (after optional whitespace) from the front of *s.
bool take(std::string_view* s, std::string_view tag) {
  std::string_view t = *s;
  while (!t.empty() && is_ws(t.front())) t.remove_prefix(1);
  if (!t.starts_with(tag)) return false;
  *s = t.substr(tag.size());
  return true;
}

// `name="VALUE"` followed by `rest`: VALUE, or false.
bool take_attr(std::string_view* s, std::string_view name, std::string* value) {
  if (!take(s, std::string(name) + "=\"")) return false;
  const size_t q = s->find('"');
  if (q == std::string_view::npos) return false;
  *value = std::string(s->substr(0, q));
  s->remove_prefix(q + 1);
  return true;
}

// The invokes of a DSML block, each `<｜DSML｜invoke name="f">` + parameters + `</｜DSML｜invoke>`.
bool parse_dsml(std::string_view body, std::vector<ToolCall>* out) {
  const std::string invoke = "<" + std::string(kDsml) + "invoke";
  const std::string invoke_end = "</" + std::string(kDsml) + "invoke>";
  const std::string param = "<" + std::string(kDsml) + "parameter";
  const std::string param_end = "</" + std::string(kDsml) + "parameter>";
  std::vector<ToolCall> calls;
  while (!trim(body).empty()) {
    std::string name;
    if (!take(&body, invoke) || !take_attr(&body, "name", &name) || !take(&body, ">")) return false;
    ojson args = ojson::object();
    while (!take(&body, invoke_end)) {
      std::string key, is_string;
      if (!take(&body, param) || !take_attr(&body, "name", &key) || !take_attr(&body, "string", &is_string) ||
          !take(&body, ">"))
        return false;
      const size_t end = body.find(param_end);
      if (end == std::string_view::npos) return false;
      const std::string_view value = body.substr(0, end);
      body.remove_prefix(end + param_end.size());
      if (is_string == "true") {
        args[key] = std::string(value);
      } else {
        ojson v = ojson::parse(value, nullptr, false);
        if (v.is_discarded()) return false;
        args[key] = std::move(v);
      }
    }
    calls.push_back(ToolCall{std::move(name), compact(args)});
  }
  if (calls.empty()) return false;
  for (ToolCall& c : calls) out->push_back(std::move(c));
  return true;
}

// The length of the longest suffix of `s` that is a proper prefix of `tag`.
size_t partial_suffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (tag.starts_with(s.substr(s.size() - n))) return n;
  return 0;
}

}  // namespace

ToolCallParser::ToolCallParser(ToolSyntax syntax) : syntax_(syntax), open_(tool_call_trigger(syntax)) {
  close_ = syntax == ToolSyntax::dsml ? "</" + std::string(kDsml) + "tool_calls>" : "</tool_call>";
}

// Content is shown as it comes except trailing whitespace, which waits for the next text (and is
// dropped when a call follows, or at the end after calls).
void ToolCallParser::emit_text(ToolCallDelta* d, std::string_view text, bool at_end) {
  if (text.empty()) return;
  size_t end = text.size();
  while (end > 0 && is_ws(text[end - 1])) --end;
  if (end == 0) {
    held_ws_ += text;
  } else {
    d->content += held_ws_;
    d->content += text.substr(0, end);
    held_ws_ = std::string(text.substr(end));
  }
  if (at_end && n_calls_ == 0) {
    d->content += held_ws_;
    held_ws_.clear();
  }
}

void ToolCallParser::scan(ToolCallDelta* d, bool at_end) {
  for (;;) {
    if (!inside_) {
      const size_t at = buf_.find(open_);
      if (at == std::string::npos) {
        const size_t keep = at_end ? 0 : partial_suffix(buf_, open_);
        emit_text(d, std::string_view(buf_).substr(0, buf_.size() - keep), at_end);
        buf_.erase(0, buf_.size() - keep);
        return;
      }
      emit_text(d, std::string_view(buf_).substr(0, at), false);
      buf_.erase(0, at + open_.size());
      inside_ = true;
      continue;
    }
    const size_t at = buf_.find(close_);
    if (at == std::string::npos && !at_end) return;
    const std::string_view body = std::string_view(buf_).substr(0, std::min(at, buf_.size()));
    const size_t before = d->calls.size();
    const bool ok = syntax_ == ToolSyntax::dsml ? parse_dsml(body, &d->calls) : parse_hermes(body, &d->calls);
    if (ok) {
      n_calls_ += static_cast<int>(d->calls.size() - before);
      held_ws_.clear();
    } else {  // not a call: its text is content
      std::string text = open_ + std::string(body) + (at == std::string::npos ? "" : close_);
      emit_text(d, text, false);
    }
    buf_.erase(0, at == std::string::npos ? buf_.size() : at + close_.size());
    inside_ = false;
    if (at_end && buf_.empty()) return;
  }
}

ToolCallDelta ToolCallParser::feed(std::string_view text) {
  buf_ += text;
  ToolCallDelta d;
  scan(&d, false);
  return d;
}

ToolCallDelta ToolCallParser::finish() {
  ToolCallDelta d;
  scan(&d, true);
  if (n_calls_ == 0) d.content += std::exchange(held_ws_, std::string());
  held_ws_.clear();
  return d;
}

ToolCallDelta parse_tool_calls(ToolSyntax syntax, std::string_view text) {
  ToolCallParser p(syntax);
  ToolCallDelta d = p.feed(text);
  ToolCallDelta rest = p.finish();
  d.content += rest.content;
  for (ToolCall& c : rest.calls) d.calls.push_back(std::move(c));
  return d;
}

}  // namespace strata::server
