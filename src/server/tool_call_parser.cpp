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

// One call object: `{"name": "f", "arguments": {...}}` (llama3 writes "parameters", taken too; the
// arguments may be a JSON string of an object).
bool parse_call_object(const ojson& j, std::vector<ToolCall>* out) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  ToolCall c{j["name"].get<std::string>(), "{}"};
  auto a = j.find("arguments");
  if (a == j.end()) a = j.find("parameters");
  if (a != j.end() && !a->is_null()) {  // an object, or a JSON string of one
    if (a->is_string()) {
      if (!ojson::parse(a->get<std::string>(), nullptr, false).is_object()) return false;
      c.arguments = a->get<std::string>();
    } else if (a->is_object()) {
      c.arguments = compact(*a);
    } else {
      return false;
    }
  }
  out->push_back(std::move(c));
  return true;
}

// Mistral: a JSON array of call objects.
bool parse_mistral(std::string_view body, std::vector<ToolCall>* out) {
  const ojson j = ojson::parse(trim(body), nullptr, false);
  if (!j.is_array() || j.empty()) return false;
  std::vector<ToolCall> calls;
  for (const ojson& c : j)
    if (!parse_call_object(c, &calls)) return false;
  for (ToolCall& c : calls) out->push_back(std::move(c));
  return true;
}

// Harmony, after "to=functions.": `NAME[ <|constrain|>json| json]<|message|>ARGS`.
bool parse_harmony(std::string_view body, std::vector<ToolCall>* out) {
  const size_t name_end = body.find_first_of(" \t\n<");
  const size_t msg = body.find("<|message|>");
  if (name_end == 0 || name_end == std::string_view::npos || msg == std::string_view::npos || msg < name_end)
    return false;
  const std::string_view header = trim(body.substr(name_end, msg - name_end));
  if (!header.empty() && header != "<|constrain|>json" && header != "json") return false;
  const ojson args = ojson::parse(trim(body.substr(msg + 11)), nullptr, false);
  if (!args.is_object()) return false;
  out->push_back(ToolCall{std::string(body.substr(0, name_end)), compact(args)});
  return true;
}

// Where the JSON object or array that `s` opens with (after whitespace) ends: its end, npos while
// it is unfinished, 0 when `s` does not open one.
size_t json_value_end(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && is_ws(s[i])) ++i;
  if (i == s.size()) return std::string_view::npos;
  if (s[i] != '{' && s[i] != '[') return 0;
  int depth = 0;
  bool in_string = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

// `{"name": "f", "arguments": {...}}` (hermes, llama3).
bool parse_json_call(std::string_view body, std::vector<ToolCall>* out) {
  return parse_call_object(ojson::parse(trim(body), nullptr, /*allow_exceptions=*/false), out);
}

// `s` without the whitespace outside its strings (compact JSON, the model's escapes and numbers kept):
// the compact form of a prefix is a prefix of the whole's, so arguments stream as they come.
std::string strip_ws(std::string_view s) {
  std::string out;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (is_ws(c)) {
      continue;
    }
    out += c;
  }
  return out;
}

// `{"name": "NAME", "arguments": ` (or "parameters") up to the `{` of the arguments: where it is.
bool json_head(std::string_view s, std::string* name, size_t* args_at) {
  size_t i = 0;
  auto tag = [&](std::string_view t) {
    while (i < s.size() && is_ws(s[i])) ++i;
    if (s.substr(i, t.size()) != t) return false;
    i += t.size();
    return true;
  };
  if (!tag("{") || !tag("\"name\"") || !tag(":") || !tag("\"")) return false;
  const size_t q = s.find('"', i);
  if (q == std::string_view::npos || q == i || s.substr(i, q - i).find('\\') != std::string_view::npos)
    return false;
  *name = std::string(s.substr(i, q - i));
  i = q + 1;
  if (!tag(",") || !(tag("\"arguments\"") || tag("\"parameters\"")) || !tag(":") || !tag("{")) return false;
  *args_at = i - 1;
  return true;
}

// The length of the longest suffix of `s` that is a proper prefix of `tag`.
size_t partial_suffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (tag.starts_with(s.substr(s.size() - n))) return n;
  return 0;
}

}  // namespace

ToolCallParser::ToolCallParser(ToolSyntax syntax, std::vector<std::string> hidden, bool stream)
    : hidden_(std::move(hidden)), stream_(stream), syntax_(syntax), open_(tool_call_trigger(syntax)) {
  std::erase(hidden_, std::string());
  switch (syntax) {
    case ToolSyntax::hermes:
      close_ = "</tool_call>";
      break;
    case ToolSyntax::dsml:
      close_ = "</" + std::string(kDsml) + "tool_calls>";
      break;
    case ToolSyntax::llama3:
      keep_open_ = true;
      joiner_ = "<|python_tag|>";
      break;
    case ToolSyntax::mistral:
      break;
    case ToolSyntax::harmony:
      close_ = "<|call|>";
      joiner_ = "<|start|>assistant";
      break;
  }
}

bool ToolCallParser::call_head(std::string* name, size_t* args_at) const {
  switch (syntax_) {
    case ToolSyntax::hermes:
    case ToolSyntax::llama3:
      return json_head(buf_, name, args_at);
    case ToolSyntax::harmony: {
      const size_t name_end = buf_.find_first_of(" \t\n<");
      const size_t msg = buf_.find("<|message|>");
      if (name_end == 0 || name_end == std::string::npos || msg == std::string::npos || msg < name_end)
        return false;
      size_t i = msg + 11;
      while (i < buf_.size() && is_ws(buf_[i])) ++i;
      if (i >= buf_.size() || buf_[i] != '{') return false;
      *name = buf_.substr(0, name_end);
      *args_at = i;
      return true;
    }
    case ToolSyntax::dsml:
    case ToolSyntax::mistral:
      break;
  }
  return false;
}

std::string ToolCallParser::args_text(size_t at) const {
  std::string_view v = std::string_view(buf_).substr(at);
  if (const size_t e = json_value_end(v); e != std::string_view::npos && e != 0) v = v.substr(0, e);
  return strip_ws(v);
}

void ToolCallParser::stream_args(ToolCallDelta* d) {
  std::string name;
  size_t at = 0;
  if (!call_head(&name, &at)) return;
  const std::string args = args_text(at);
  if (!head_sent_) {
    d->opened = true;
    d->open_name = std::move(name);
    head_sent_ = true;
  }
  if (args.size() > args_sent_) d->args_delta += args.substr(args_sent_);
  args_sent_ = std::max(args_sent_, args.size());
}

// How many bytes at the end of `text` are whitespace and joiners.
size_t ToolCallParser::held_suffix(std::string_view text) const {
  size_t end = text.size();
  for (;;) {
    if (end > 0 && is_ws(text[end - 1])) {
      --end;
    } else if (!joiner_.empty() && text.substr(0, end).ends_with(joiner_)) {
      end -= joiner_.size();
    } else {
      return text.size() - end;
    }
  }
}

// Content is shown as it comes except trailing whitespace (and joiners), which waits for the next
// text (and is dropped when a call follows, or at the end after calls).
void ToolCallParser::emit_text(ToolCallDelta* d, std::string_view text, bool at_end) {
  if (text.empty()) return;
  const size_t end = text.size() - held_suffix(text);
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
        size_t keep = 0;
        if (!at_end) {
          keep = partial_suffix(buf_, open_);
          if (!joiner_.empty()) keep = std::max(keep, partial_suffix(buf_, joiner_));
        }
        emit_text(d, std::string_view(buf_).substr(0, buf_.size() - keep), at_end);
        buf_.erase(0, buf_.size() - keep);
        return;
      }
      emit_text(d, std::string_view(buf_).substr(0, at), false);
      buf_.erase(0, keep_open_ ? at : at + open_.size());
      inside_ = true;
      continue;
    }
    // The call's text: up to close_, or the JSON value it opens with.
    size_t at = std::string::npos, end = std::string::npos;
    if (close_.empty()) {
      const size_t e = json_value_end(buf_);
      if (e != std::string::npos) at = end = e;
    } else if ((at = buf_.find(close_)) != std::string::npos) {
      end = at + close_.size();
    }
    if (at == std::string::npos && !at_end) {
      if (stream_) stream_args(d);
      return;
    }
    const std::string_view body = std::string_view(buf_).substr(0, std::min(at, buf_.size()));
    const size_t before = d->calls.size();
    bool ok = false;
    switch (syntax_) {
      case ToolSyntax::hermes:
      case ToolSyntax::llama3:
        ok = parse_json_call(body, &d->calls);
        break;
      case ToolSyntax::dsml:
        ok = parse_dsml(body, &d->calls);
        break;
      case ToolSyntax::mistral:
        ok = parse_mistral(body, &d->calls);
        break;
      case ToolSyntax::harmony:
        ok = parse_harmony(body, &d->calls);
        break;
    }
    if (ok && d->calls.size() == before + 1) {  // one call: its arguments as they streamed
      ToolCall& c = d->calls.back();
      std::string name;
      size_t args_at = 0;
      if (call_head(&name, &args_at)) {
        std::string raw = args_text(args_at);
        const ojson a = ojson::parse(raw, nullptr, false);
        if (a.is_object() && compact(a) == c.arguments) c.arguments = std::move(raw);
      }
      c.head_sent = head_sent_;
      c.args_sent = std::min(args_sent_, c.arguments.size());
    }
    // A call already opened in the stream that turns out not to parse (cut by max_tokens: under a
    // grammar nothing else can break it) stays that partial call; its text is not content too.
    const bool opened = std::exchange(head_sent_, false);
    args_sent_ = 0;
    if (opened && !ok) {  // a call for the client: the whitespace before it goes with it
      ++n_calls_;
      held_ws_.clear();
    }
    if (ok) {
      n_calls_ += static_cast<int>(d->calls.size() - before);
      held_ws_.clear();
      buf_.erase(0, end == std::string::npos ? buf_.size() : end);
    } else if (close_.empty() && at != std::string::npos && at > 0) {
      // Not a call (a JSON value that is not one, or no JSON value): shown up to where it ends.
      if (!opened) emit_text(d, (keep_open_ ? "" : open_) + std::string(body), false);
      buf_.erase(0, at);
    } else if (close_.empty() && at == 0) {  // no JSON value follows: the open text is content
      const size_t n = keep_open_ ? open_.size() : 0;
      emit_text(d, open_, false);
      buf_.erase(0, n);
    } else {  // not a call: its text is content
      const std::string text = (keep_open_ ? "" : open_) + std::string(body) +
                               (at == std::string::npos || close_.empty() ? "" : close_);
      if (!opened) emit_text(d, text, false);
      buf_.erase(0, end == std::string::npos ? buf_.size() : end);
    }
    inside_ = false;
    if (at_end && buf_.empty()) return;
  }
}

void ToolCallParser::hide(ToolCallDelta* d) const {
  for (const std::string& h : hidden_)
    for (size_t at = 0; (at = d->content.find(h, at)) != std::string::npos;) d->content.erase(at, h.size());
}

ToolCallDelta ToolCallParser::feed(std::string_view text) {
  buf_ += text;
  ToolCallDelta d;
  scan(&d, false);
  hide(&d);
  return d;
}

ToolCallDelta ToolCallParser::finish() {
  ToolCallDelta d;
  scan(&d, true);
  if (n_calls_ == 0) d.content += std::exchange(held_ws_, std::string());
  held_ws_.clear();
  hide(&d);
  return d;
}

ToolCallDelta parse_tool_calls(ToolSyntax syntax, std::string_view text, std::vector<std::string> hidden) {
  ToolCallParser p(syntax, std::move(hidden));
  ToolCallDelta d = p.feed(text);
  ToolCallDelta rest = p.finish();
  d.content += rest.content;
  for (ToolCall& c : rest.calls) d.calls.push_back(std::move(c));
  return d;
}

}  // namespace strata::server
