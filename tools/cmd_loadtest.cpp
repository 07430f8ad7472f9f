// strata loadtest: streamed completion requests from C concurrent clients against an
// OpenAI-compatible server (--url), or against `strata serve` started in this process on a free
// port (-m MODEL, with serve's slot and expert flags). Reports TTFT, time per output token and
// request latency percentiles per prompt class (short / long) and throughput; with -m also the
// server side: slots, KV bytes, peak RSS, expert hit rate.
// --texts FILE writes each request's generated text (JSON lines, request order); --expect-texts FILE
// checks this run's texts against such a file (e.g. a run under --kv-budget pressure against an
// unconstrained one, at --temp 0 or with seeds): differences are listed and fail the run.
//   strata loadtest -m MODEL.gguf -np 4 --concurrency 4 --requests 32 --classes short:32,long:256 -n 64
//   strata loadtest --url http://127.0.0.1:8080 --concurrency 8 --json report.json
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <utility>
#include <thread>

#include "cli_args.h"
#include "command.h"
#include "engram_flags.h"
#include "expert_flags.h"
#include "kv_pool_flags.h"
#include "model/model.h"
#include "obs/proc_mem.h"
#include "runtime/engine.h"
#include "server/http_server.h"
#include "server/load_test.h"

namespace {

int fail(const std::string& msg, int code = 1) {
  std::fprintf(stderr, "strata loadtest: error: %s\n", msg.c_str());
  return code;
}

// "short:32,long:256" -> classes.
strata::Result<std::vector<strata::server::PromptClass>> parse_classes(const std::string& s) {
  std::vector<strata::server::PromptClass> v;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = std::min(s.find(',', at), s.size());
    const std::string item = s.substr(at, comma - at);
    const size_t colon = item.find(':');
    if (colon == std::string::npos || colon == 0)
      return strata::err("--classes: '%s' is not NAME:WORDS", item.c_str());
    char* end = nullptr;
    const long w = std::strtol(item.c_str() + colon + 1, &end, 10);
    if (!end || *end || w < 1 || w > 1000000)
      return strata::err("--classes: bad word count in '%s'", item.c_str());
    v.push_back({item.substr(0, colon), static_cast<int>(w)});
    at = comma + 1;
  }
  return v;
}

// "http://HOST:PORT[/]" -> (HOST, PORT). (No std::regex: GCC 12 warns inside it under -O2 sanitizers.)
strata::Result<std::pair<std::string, int>> parse_url(const std::string& url) {
  const std::string bad = "--url '" + url + "' is not http://HOST:PORT";
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) return strata::err("%s", bad.c_str());
  std::string rest = url.substr(scheme.size());
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size() ||
      rest.find('/') != std::string::npos)
    return strata::err("%s", bad.c_str());
  const std::string port = rest.substr(colon + 1);
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    return strata::err("%s", bad.c_str());
  const int p = std::stoi(port);
  if (p < 1 || p > 65535) return strata::err("%s", bad.c_str());
  return std::make_pair(rest.substr(0, colon), p);
}

// A --texts file: one JSON object a line, "request" (its index) and "text".
strata::Result<std::vector<std::string>> read_texts(const std::string& path) {
  std::ifstream f(path);
  if (!f) return strata::err("--expect-texts: cannot read '%s'", path.c_str());
  std::vector<std::string> v;
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("request") || !j["request"].is_number_unsigned() ||
        !j.contains("text") || !j["text"].is_string())
      return strata::err("--expect-texts: %s line %d is not {\"request\": N, \"text\": \"...\"}",
                         path.c_str(), n);
    const size_t i = j["request"].get<size_t>();
    if (i > (1u << 24)) return strata::err("--expect-texts: %s line %d: request %zu", path.c_str(), n, i);
    if (v.size() <= i) v.resize(i + 1);
    v[i] = j["text"].get<std::string>();
  }
  return v;
}

// Prints how many of this run's texts equal the expected ones; 1 when any differs or is missing.
int compare_texts(const std::vector<std::string>& got, const std::vector<std::string>& want,
                  const std::string& path) {
  size_t same = 0;
  std::vector<size_t> differ;
  for (size_t i = 0; i < got.size(); ++i) {
    if (i < want.size() && got[i] == want[i] && !got[i].empty())
      ++same;
    else
      differ.push_back(i);
  }
  std::printf("texts: %zu of %zu requests equal %s", same, got.size(), path.c_str());
  if (want.size() != got.size()) std::printf(" (it holds %zu)", want.size());
  if (!differ.empty()) {
    std::printf("; differ or failed:");
    for (size_t k = 0; k < differ.size() && k < 16; ++k) std::printf(" %zu", differ[k]);
    if (differ.size() > 16) std::printf(" ...");
  }
  std::printf("\n");
  return differ.empty() && want.size() == got.size() ? 0 : 1;
}

int cmd_loadtest(int argc, char** argv) {
  strata::server::LoadTestOptions o;
  std::string url, model_path, classes = "short:32,long:256", json_out, ctx = "0";
  int slots = 4, threads = 0;
  CLI::App app{"Load-test an OpenAI-compatible server", "strata loadtest"};
  app.add_option("--url", url, "server to test, http://HOST:PORT");
  app.add_option("-m,--model", model_path, "start `strata serve` on this model in-process and test it");
  app.add_option("--parallel", slots, "with -m: slots")->capture_default_str();
  app.add_option("-c,--ctx-size", ctx, "with -m: context of each slot (0: model's, at most 4096)")
      ->capture_default_str();
  app.add_option("-t,--threads", threads, "with -m: threads (default: all cores)");
  strata::EngineOptions eo;
  app.add_option("-b,--batch-size", eo.n_batch, "with -m: tokens of one scheduler turn at most")
      ->capture_default_str();
  app.add_option("--ubatch-size", eo.n_ubatch, "with -m: tokens per forward step")->capture_default_str();
  app.add_option("--concurrency", o.concurrency, "clients sending at once")->capture_default_str();
  app.add_option("--requests", o.requests, "requests in all (classes take turns)")->capture_default_str();
  app.add_option("-n,--max-tokens", o.max_tokens, "tokens per request")->capture_default_str();
  app.add_option("--classes", classes, "prompt classes NAME:WORDS,...")->capture_default_str();
  app.add_option("--temp", o.temperature, "temperature")->capture_default_str();
  app.add_option("--api-key", o.api_key, "Authorization: Bearer KEY");
  app.add_option("--json", json_out, "write the report as JSON to this file");
  std::string texts_out, texts_expected;
  app.add_option("--texts", texts_out, "write each request's generated text to this file (JSON lines)");
  app.add_option("--expect-texts", texts_expected,
                 "a --texts file of an earlier run: this run's texts must equal it (else exit 1)");
  strata::cli::KvPoolFlags kpf;
  kpf.add(app);
  strata::cli::EngramFlags ef;
  strata::cli::ExpertFlags xf;
  xf.add(app);
  ef.add(app);
  if (auto rc = strata::cli::parse_args(app, argc, argv, "loadtest")) return *rc;
  if (url.empty() == model_path.empty()) return fail("give either --url http://HOST:PORT or -m MODEL", 2);
  auto cls = parse_classes(classes);
  if (!cls.ok()) return fail(cls.message(), 2);
  o.classes = *cls;
  o.keep_texts = !texts_out.empty() || !texts_expected.empty();
  std::vector<std::string> expected;
  if (!texts_expected.empty()) {
    auto e = read_texts(texts_expected);
    if (!e.ok()) return fail(e.message(), 2);
    expected = std::move(*e);
  }
  if (!url.empty() && kpf.any()) return fail("the KV pool flags configure the server of -m (not --url)", 2);
  if (o.concurrency < 1 || o.concurrency > 1024) return fail("--concurrency must be in [1, 1024]", 2);
  if (o.requests < 1) return fail("--requests must be >= 1", 2);
  if (o.max_tokens < 1) return fail("--max-tokens must be >= 1", 2);

  std::unique_ptr<strata::Model> model;
  std::unique_ptr<strata::Engine> engine;
  std::unique_ptr<strata::server::HttpServer> http;
  std::thread server_thread;
  if (!url.empty()) {
    auto hp = parse_url(url);
    if (!hp.ok()) return fail(hp.message(), 2);
    o.host = hp->first;
    o.port = hp->second;
  } else {
    auto c = strata::cli::parse_ctx(ctx);
    if (!c.ok()) return fail(c.message(), 2);
    if (slots < 1 || slots > 256) return fail("--parallel must be in [1, 256]", 2);
    strata::LoadOptions lo{.n_threads = threads};
    if (auto st = xf.apply(&lo); !st.ok()) return fail(st.message(), 2);
    if (auto st = ef.apply(&lo, model_path, xf); !st.ok()) return fail(st.message(), 2);
    auto m = strata::Model::load(model_path, lo);
    if (!m.ok()) return fail("loading " + model_path + ": " + m.message());
    model = std::move(*m);
    if (!model->has_tokenizer()) return fail(model_path + " has no tokenizer", 2);
    eo.n_slots = slots;
    eo.max_queue = o.requests;
    if (auto st = kpf.apply(&eo); !st.ok()) return fail(st.message(), 2);
    const strata::SessionOptions so{.n_ctx = *c};
    auto e = strata::Engine::for_model(*model, so, eo);
    if (!e.ok()) return fail(e.message(), 2);
    engine = std::move(*e);
    strata::server::ServerOptions sopt;
    sopt.port = 0;
    sopt.model_name = model_path;
    http = std::make_unique<strata::server::HttpServer>(*engine, model->tokenizer(), std::nullopt, sopt);
    auto port = http->bind();
    if (!port.ok()) return fail(port.message());
    o.port = *port;
    server_thread = std::thread([&] { http->run(); });
  }
  auto rep = strata::server::run_load_test(o);
  if (http) {
    http->stop();
    server_thread.join();
  }
  if (!rep.ok()) return fail(rep.message());
  std::fputs(strata::server::load_report_text(*rep).c_str(), stdout);
  if (engine) {
    const strata::EngineCounters c = engine->counters();
    std::printf(
        "server: %d slots x %d context, KV %.1f MiB, peak RSS %.1f MiB, %llu prompt + %llu generated tokens",
        engine->n_slots(), engine->n_ctx(), static_cast<double>(engine->kv_bytes()) / (1 << 20),
        static_cast<double>(strata::peak_rss_bytes()) / (1 << 20),
        static_cast<unsigned long long>(c.prompt_tokens), static_cast<unsigned long long>(c.gen_tokens));
    if (const strata::ExpertStore* st = model->expert_store())
      std::printf(", expert hit rate %.1f%%", 100.0 * st->totals().hit_rate());
    std::printf("\n");
  }
  if (!json_out.empty()) {
    nlohmann::json j = strata::server::load_report_json(*rep);
    if (engine) {
      j["server"] = {{"slots", engine->n_slots()},
                     {"n_ctx", engine->n_ctx()},
                     {"kv_bytes", engine->kv_bytes()},
                     {"peak_rss_bytes", strata::peak_rss_bytes()}};
      if (const strata::ExpertStore* st = model->expert_store())
        j["server"]["expert_hit_rate"] = st->totals().hit_rate();
    }
    std::ofstream f(json_out);
    if (!(f << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n"))
      return fail("cannot write '" + json_out + "'");
  }
  int text_rc = 0;
  if (!texts_out.empty()) {
    std::ofstream f(texts_out);
    for (size_t i = 0; i < rep->texts.size(); ++i)
      f << nlohmann::json{{"request", i},
                          {"class", o.classes[i % o.classes.size()].name},
                          {"text", rep->texts[i]}}
               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
        << "\n";
    if (!f) return fail("cannot write '" + texts_out + "'");
  }
  if (!texts_expected.empty()) {
    text_rc = compare_texts(rep->texts, expected, texts_expected);
  }
  engine.reset();
  if (model) {
    if (auto st = xf.finish(*model); !st.ok()) return fail(st.message());
  }
  const auto& all = rep->classes.back();
  return all.failed || text_rc ? 1 : 0;
}

const strata::cli::Registrar reg{
    "loadtest", "load-test an OpenAI-compatible server: TTFT / TPOT / latency percentiles", &cmd_loadtest};

}  // namespace
