// strata serve: an OpenAI-compatible HTTP server (server/http_server.h) over N slots of the
// engine (runtime/engine.h), with the same model, expert-store and Engram flags as `run`.
//   strata serve -m MODEL.gguf [--host 127.0.0.1] [--port 8080] [-np|--parallel 4] [-c 4096]
//   [--expert-budget 8G] [-to|--timeout 600] [--max-connections 4096] [--shutdown-timeout 5]
//   [--max-stop 16] [--max-unsent-bytes 2097152] [--ssl-key-file KEY.pem --ssl-cert-file CERT.pem]
//   [--chat-template NAME] [--jinja [--chat-template-file F]]
//   [--kv-budget SIZE] [--block-size 16] [--no-prefix-cache] [-cram SIZE] [--prefix-cache-dir DIR]
//   [--prefix-cache-dir-size SIZE] [-ctxcp N]   (tools/kv_pool_flags.h)
// The live dashboard is at / (server/stats_feed.h).
// SIGINT / SIGTERM stop it; the expert profile and statistics are written on the way out.
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <vector>
#include <thread>

#include "base/clock.h"
#include "base/units.h"
#include "cli_args.h"
#include "command.h"
#include "engram_flags.h"
#include "device_flags.h"
#include "expert_flags.h"
#include "kv_pool_flags.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "server/http_server.h"
#include "format/safetensors_dir.h"
#include "text/chat_template.h"
#include "text/chat_template_jinja.h"

namespace {

int fail(const std::string& msg, int code = 1) {
  std::fprintf(stderr, "strata serve: error: %s\n", msg.c_str());
  return code;
}

// The paged KV pool in the start line: blocks, their size and whether prefixes are shared.
std::string kv_note(const strata::Engine& e) {
  const strata::KvPool* p = e.kv_pool();
  if (!p) return "";
  const strata::KvSpillStats sp = p->stats().spill;
  std::string ssd = "off";
  if (p->disk_tier()) {
    ssd = p->disk_tier()->dir() + ": " + std::to_string(sp.disk_blocks) + " blocks";
    if (sp.disk_budget > 0) ssd += " of " + strata::format_bytes(sp.disk_budget) + " at most";
  }
  char b[512];
  std::snprintf(b, sizeof b, " (paged: %d blocks of %d positions, prefix cache %s, RAM tier %s, SSD tier %s)",
                p->n_blocks(), p->block_size(), p->prefix_cache() ? "on" : "off",
                sp.ram_on ? strata::format_bytes(sp.ram_budget).c_str() : "off", ssd.c_str());
  return b;
}

int cmd_serve(int argc, char** argv) {
  std::string model_path, ctx = "0", chat_template, alias;
  int threads = 0;
  strata::EngineOptions eo;
  strata::server::ServerOptions so;
  CLI::App app{"Serve a model over an OpenAI-compatible HTTP API", "strata serve"};
  app.add_option("-m,--model", model_path, "GGUF model or checkpoint directory")->required();
  std::string tokenizer_path;
  app.add_option(
      "--tokenizer", tokenizer_path,
      "Hugging Face tokenizer.json to use instead of the model's (a tokenizer_config.json beside it "
      "is read too)");
  app.add_option("--host", so.host, "address to listen on")->capture_default_str();
  app.add_option("--port", so.port, "port to listen on")->capture_default_str();
  app.add_option("--parallel", eo.n_slots,
                 "-np: sequences running at most (with paged KV they are admitted by KV budget)")
      ->capture_default_str();
  app.add_option("-c,--ctx-size", ctx,
                 "context of each sequence, its positions at most (K suffix ok; 0: model's, at most 4096; "
                 "unlike llama.cpp's, not shared by the sequences)")
      ->capture_default_str();
  strata::cli::KvPoolFlags kpf;
  kpf.add(app);
  app.add_option("-b,--batch-size", eo.n_batch,
                 "tokens of one scheduler turn's batch at most (the slots' decode tokens + prompt chunks)")
      ->capture_default_str();
  app.add_option("--ubatch-size", eo.n_ubatch, "tokens per forward step (a turn's batch is split)")
      ->capture_default_str();
  app.add_option("--max-queue", eo.max_queue, "requests waiting for a slot before new ones get 503")
      ->capture_default_str();
  app.add_option("-t,--threads", threads, "threads (default: all cores)");
  app.add_option("--alias", alias, "model name reported by the API (default: the file name)");
  app.add_option("--api-key", so.api_key, "require Authorization: Bearer KEY");
  app.add_option("--cors-origins", so.cors_origins,
                 "browser origins allowed to call the API, comma-separated (\"*\": any; default: none)")
      ->delimiter(',');
  app.add_option(
         "--timeout", so.timeout_s,
         "-to: seconds a request's header, its body, an idle keep-alive connection or one write may take")
      ->capture_default_str();
  app.add_option("--max-connections", so.max_connections,
                 "open client connections at most (new ones beyond get a 503; RLIMIT_NOFILE is raised to its "
                 "hard limit)")
      ->capture_default_str();
  app.add_option("--shutdown-timeout", so.shutdown_timeout_s,
                 "seconds SIGINT / SIGTERM waits for open streams to end with a final event")
      ->capture_default_str();
  app.add_option("--max-stop", so.max_stop, "stop strings per request at most (each at most 256 bytes)")
      ->capture_default_str();
  app.add_option("--max-body", so.max_body_bytes, "request body bytes at most (Content-Length or chunked)")
      ->capture_default_str();
  app.add_option("--max-unsent-bytes", so.max_unsent_bytes,
                 "bytes of a stream waiting for a client that does not read them at most (beyond: the "
                 "request is cancelled and the connection closed)")
      ->capture_default_str();
  std::string profile = "accurate";
  app.add_option(
         "--profile", profile,
         "accurate | fast: the profile of requests that name none (\"profile\" in the request body; "
         "fast skips routed experts weighing less than 0.7 of a token's mean choice and keeps half of "
         "DeepSeek sparse attention's indexer top-k)")
      ->capture_default_str();
  app.add_option("--ssl-key-file", so.ssl_key_file, "PEM private key: serve HTTPS (with --ssl-cert-file)");
  app.add_option("--ssl-cert-file", so.ssl_cert_file,
                 "PEM certificate (chain): serve HTTPS (with --ssl-key-file)");
  app.add_option("--chat-template", chat_template,
                 "chat format for /v1/chat/completions: a built-in name (" +
                     strata::chat_format_names_joined() +
                     ") or a Jinja template to recognise (default: the model's, else chatml)");
  bool jinja = false;
  std::string chat_template_file;
  app.add_flag(
      "--jinja", jinja,
      "render chat prompts with the model's own Jinja chat template (tokenizer.chat_template, or "
      "--chat-template-file) in strata's Jinja engine; the built-in format stays for tool-call parsing "
      "and is the fallback when the model has no template");
  app.add_option("--chat-template-file", chat_template_file,
                 "a Jinja chat template file: the template --jinja renders (without --jinja: recognised as "
                 "--chat-template is)");
  strata::cli::EngramFlags ef;
  strata::cli::ExpertFlags xf;
  strata::cli::DeviceFlags df;  // outlives the model
  xf.add(app);
  ef.add(app);
  df.add(app);
  strata::cli::KvTypeFlags kf;
  strata::cli::add_kv_type_flags(app, kf, "f16");
  if (auto rc = strata::cli::parse_args(app, argc, argv, "serve")) return *rc;
  auto kv = strata::cli::kv_types(kf, "f16");
  if (!kv.ok()) return fail(kv.message(), 2);
  auto c = strata::cli::parse_ctx(ctx);
  if (!c.ok()) return fail(c.message(), 2);
  if (so.port < 0 || so.port > 65535) return fail("--port must be in [0, 65535]", 2);
  if (eo.n_slots < 1 || eo.n_slots > 256)
    return fail("--parallel " + std::to_string(eo.n_slots) + " must be in [1, 256]", 2);
  if (eo.max_queue < 0) return fail("--max-queue must be >= 0", 2);
  if (!(so.timeout_s > 0)) return fail("--timeout must be > 0 seconds", 2);
  if (so.max_connections < 1) return fail("--max-connections must be >= 1", 2);
  if (!(so.shutdown_timeout_s >= 0)) return fail("--shutdown-timeout must be >= 0 seconds", 2);
  if (so.max_stop < 0) return fail("--max-stop must be >= 0", 2);
  if (so.max_body_bytes < 1) return fail("--max-body must be >= 1", 2);
  if (so.max_unsent_bytes < 1) return fail("--max-unsent-bytes must be >= 1", 2);
  if (auto p = strata::parse_profile(profile); p.ok())
    so.profile = *p;
  else
    return fail("--profile: " + p.message(), 2);
  if (eo.n_ubatch < 1) return fail("-ub must be >= 1", 2);
  if (eo.n_batch < eo.n_slots) return fail("-b must be at least --parallel (one decode token per slot)", 2);
  if (auto st = kpf.apply(&eo); !st.ok()) return fail(st.message(), 2);

  // Signals go to one thread that stops the server (stop() is not async-signal-safe).
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  const double t0 = strata::now_seconds();
  strata::LoadOptions lo{.n_threads = threads, .tokenizer_path = tokenizer_path};
  if (auto st = xf.apply(&lo); !st.ok()) return fail(st.message(), 2);
  if (auto st = ef.apply(&lo, model_path, xf); !st.ok()) return fail(st.message(), 2);
  if (auto st = df.apply(&lo); !st.ok()) return fail(st.message(), 2);
  auto model = strata::Model::load(model_path, lo);
  if (!model.ok()) return fail("loading " + model_path + ": " + model.message());
  strata::Model& m = **model;
  std::fputs(strata::cli::kv_types_note(m.arch().kv_spec(), *kv, m.arch().hparams().arch.c_str()).c_str(),
             stderr);
  if (!m.has_tokenizer())
    return fail(model_path +
                    " has no tokenizer: the server needs text in and out (a checkpoint directory needs its "
                    "tokenizer.json, or give --tokenizer FILE)",
                2);
  std::optional<strata::ChatFormat> chat;
  std::string chat_note;
  std::string file_template;
  if (!chat_template_file.empty()) {
    auto text = strata::read_text_file(chat_template_file);
    if (!text.ok()) return fail("--chat-template-file: " + text.message(), 2);
    file_template = std::move(*text);
    if (chat_template.empty() && !jinja) chat_template = file_template;
  }
  auto ch = m.has_gguf() ? strata::chat_format_for_model(m.file(), chat_template)
                         : strata::chat_format_for_dir(model_path, m.arch_name(), chat_template);
  if (ch.ok()) {
    chat = ch->format;
    chat_note = std::string("chat format ") + strata::chat_format_name(ch->format) + " (from " +
                strata::chat_format_source_name(ch->source) + ")";
  } else if (!chat_template.empty()) {
    return fail(ch.message(), 2);
  } else {
    chat_note = "warning: " + ch.message() + "; /v1/chat/completions is off (pass --chat-template NAME)";
  }
  if (jinja) {  // the model's own template (or the file's) rendered by strata's Jinja engine
    std::optional<std::string> source;
    if (!chat_template_file.empty()) {
      source = file_template;
      if (chat_template.empty()) {  // the tool-call syntax: the built-in format the file looks like
        auto f = strata::chat_format_detect(file_template);
        chat = f.ok() ? std::optional<strata::ChatFormat>(*f) : std::nullopt;
      }
    } else {
      auto t =
          m.has_gguf() ? strata::chat_template_of_model(m.file()) : strata::chat_template_of_dir(model_path);
      if (!t.ok()) return fail(t.message(), 2);
      source = std::move(*t);
    }
    if (!source || source->empty()) {
      chat_note += "; --jinja: the model has no chat template, the built-in format renders chats";
    } else {
      const strata::Tokenizer& tok = m.tokenizer();
      const std::string bos = tok.bos_id() >= 0 ? tok.token_to_piece(tok.bos_id(), true) : "";
      const std::string eos = tok.eos_id() >= 0 ? tok.token_to_piece(tok.eos_id(), true) : "";
      auto cj = strata::ChatJinja::parse(*source, bos, eos);
      if (!cj.ok()) {
        if (!chat_template_file.empty()) return fail(chat_template_file + ": " + cj.message(), 2);
        chat_note += "; warning: --jinja: " + cj.message() + "; the built-in format renders chats";
      } else {
        so.chat_jinja = std::make_shared<const strata::ChatJinja>(std::move(*cj));
        chat_note = "chat prompts from the " +
                    std::string(chat_template_file.empty() ? "model's" : chat_template_file) +
                    " Jinja template (--jinja)" +
                    (chat ? std::string("; tool calls parsed as ") + strata::chat_format_name(*chat)
                          : std::string("; tool calls are not parsed (no built-in format matches)"));
      }
    }
  }
  const strata::SessionOptions sopt{.n_ctx = *c, .kv = *kv};
  // The routed experts onto a GPU: what the budget leaves after the slots' KV (the paged pool's
  // --kv-budget where that is more).
  if (df.dev && m.hparams().n_expert > 0) {
    strata::SessionOptions one = sopt;
    one.n_batch = eo.n_ubatch;
    auto kv_bytes = m.session_kv_bytes(one);
    if (!kv_bytes.ok()) return fail(kv_bytes.message());
    const uint64_t reserve =
        std::max<uint64_t>(*kv_bytes * static_cast<uint64_t>(std::max(eo.n_slots, 1)), eo.kv_budget);
    auto st = df.place_experts(m, reserve, xf.profile);
    if (!st.ok()) return fail(st.message());
  }
  auto engine = strata::Engine::for_model(m, sopt, eo);
  if (!engine.ok()) return fail(engine.message(), 2);
  if (alias.empty()) {
    const size_t slash = model_path.find_last_of('/');
    alias = slash == std::string::npos ? model_path : model_path.substr(slash + 1);
  }
  so.model_name = alias;
  strata::server::HttpServer http(**engine, m.tokenizer(), chat, so);
  auto port = http.bind();
  if (!port.ok()) return fail(port.message());
  std::fprintf(stderr, "strata serve: %s\n", chat_note.c_str());
  if (!http.note().empty()) std::fprintf(stderr, "strata serve: warning: %s\n", http.note().c_str());
  std::fprintf(stderr,
               "strata serve: %s (%s) loaded in %.2f s; %d slots x %d context, KV %.1f MiB%s; device %s; "
               "listening on %s://%s:%d (dashboard: /)\n",
               alias.c_str(), m.arch_name().c_str(), strata::now_seconds() - t0, (*engine)->n_slots(),
               (*engine)->n_ctx(), static_cast<double>((*engine)->kv_bytes()) / (1 << 20),
               kv_note(**engine).c_str(), df.describe(&m).c_str(), so.ssl_key_file.empty() ? "http" : "https",
               so.host.c_str(), *port);
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    const timespec tick{0, 200 * 1000 * 1000};
    while (!done.load()) {
      const int sig = sigtimedwait(&sigs, nullptr, &tick);
      if (sig == SIGINT || sig == SIGTERM) {
        std::fprintf(stderr, "strata serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
        http.stop();
        return;
      }
    }
  });
  http.run();
  done = true;
  waiter.join();
  engine->reset();
  if (auto st = xf.finish(m); !st.ok()) return fail(st.message());
  if (auto st = ef.finish(m, xf.stats_out, false); !st.ok()) return fail(st.message());
  return 0;
}

const strata::cli::Registrar reg{"serve", "OpenAI-compatible HTTP server (completions, chat, metrics)",
                                 &cmd_serve};

}  // namespace
