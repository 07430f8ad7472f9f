// strata apply-template: render a Jinja chat template file for chat requests, without a model
// (what `strata serve --jinja` renders; used by tests/text/jinja_npm.sh to compare strata's Jinja
// engine with @huggingface/jinja on real templates, all in one process):
//   strata apply-template --jinja --chat-template-file FILE [--bos-token S] [--eos-token S] < requests.json
// stdin: a JSON list of chat requests {messages, tools?, chat_template_kwargs?,
// add_generation_prompt? (default true), chat_template_file? (this request's template instead of
// FILE)}. stdout: a JSON list with, per request, the rendered prompt (a string) or {"error": why}.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "command.h"
#include "format/safetensors_dir.h"
#include "text/chat_template_jinja.h"

namespace {

using ojson = nlohmann::ordered_json;

int fail(const std::string& msg) {
  std::fprintf(stderr, "strata apply-template: error: %s\n", msg.c_str());
  return 1;
}

int cmd_apply_template(int argc, char** argv) {
  CLI::App app{"render a Jinja chat template file for chat requests read from stdin (no model needed)"};
  std::string file, bos = "<s>", eos = "</s>";
  bool jinja = false;
  app.add_flag("--jinja", jinja,
               "render with strata's Jinja engine (required: built-in formats need a model)");
  app.add_option("--chat-template-file", file, "the Jinja chat template (a request may name its own)");
  app.add_option("--bos-token", bos, "bos_token as the template sees it")->capture_default_str();
  app.add_option("--eos-token", eos, "eos_token as the template sees it")->capture_default_str();
  app.footer(
      "stdin: a JSON list of chat requests {messages, tools?, chat_template_kwargs? (top-level template "
      "variables), add_generation_prompt? (default true), chat_template_file? (this request's template)}; "
      "stdout: a JSON list with, per request, the prompt (a string) or {\"error\": why}");
  CLI11_PARSE(app, argc, argv);
  if (!jinja)
    return fail("only --jinja rendering is available here (built-in formats: strata serve --chat-template)");
  const std::string input{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  const ojson reqs = ojson::parse(input, nullptr, /*allow_exceptions=*/false);
  if (reqs.is_discarded() || !reqs.is_array()) return fail("stdin must be a JSON list of chat requests");
  std::map<std::string, strata::Result<strata::ChatJinja>> templates;  // parsed once per file
  auto load = [&](const std::string& path) -> const strata::Result<strata::ChatJinja>& {
    auto it = templates.find(path);
    if (it != templates.end()) return it->second;
    auto text = strata::read_text_file(path);
    strata::Result<strata::ChatJinja> t = text.ok() ? strata::ChatJinja::parse(*text, bos, eos)
                                                    : strata::Result<strata::ChatJinja>(text.error());
    return templates.emplace(path, std::move(t)).first->second;
  };
  ojson out = ojson::array();
  for (const ojson& r : reqs) {
    std::string path = file;
    if (r.is_object() && r.contains("chat_template_file") && r["chat_template_file"].is_string())
      path = r["chat_template_file"].get<std::string>();
    if (path.empty()) return fail("no template: pass --chat-template-file FILE");
    const auto& t = load(path);
    if (!t.ok()) {
      out.push_back({{"error", path + ": " + t.message()}});
      continue;
    }
    const bool gen =
        r.is_object() && r.contains("add_generation_prompt") && r["add_generation_prompt"].is_boolean()
            ? r["add_generation_prompt"].get<bool>()
            : true;
    auto text = t->render(r, gen);
    if (text.ok())
      out.push_back(*text);
    else
      out.push_back({{"error", text.message()}});
  }
  std::cout << out.dump(-1, ' ', false, ojson::error_handler_t::replace) << "\n";
  return 0;
}

const strata::cli::Registrar reg{"apply-template",
                                 "render a Jinja chat template file for chat requests on stdin (--jinja)",
                                 &cmd_apply_template};

}  // namespace
