#include "server/http_server.h"

#include <httplib.h>

#include <functional>

#include "server/completion_job.h"
#include "server/openai_api.h"
#include "server/text_routes.h"

namespace strata::server {

using nlohmann::json;

namespace {

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(json_text(body), "application/json; charset=utf-8");
}

void send_error(httplib::Response& res, int status, const std::string& message) {
  send_json(res, status, error_body(message, status));
}

// One call of a streamed response's content provider: waits for the next event, writes its SSE
// chunks; false when the client is gone.
bool stream_step(CompletionJob& job, httplib::DataSink& sink) {
  if (job.finished()) {
    sink.done();
    return true;
  }
  const std::string out = job.next_sse();
  if (!out.empty() && !sink.write(out.data(), out.size())) return false;  // client gone
  if (job.finished()) sink.done();
  return true;
}

}  // namespace

HttpServer::HttpServer(Engine& engine, const Tokenizer& tok, std::optional<ChatFormat> chat,
                       ServerOptions opts)
    : engine_(engine),
      tok_(tok),
      chat_(chat),
      opts_(std::move(opts)),
      http_(std::make_unique<httplib::Server>()) {
  routes();
}

HttpServer::~HttpServer() {
  stop();
}

Result<int> HttpServer::bind() {
  if (opts_.port < 0 || opts_.port > 65535) return err("--port %d must be in [0, 65535]", opts_.port);
  if (opts_.port == 0) {
    const int p = http_->bind_to_any_port(opts_.host);
    if (p < 0) return err("cannot bind %s on any port", opts_.host.c_str());
    return p;
  }
  if (!http_->bind_to_port(opts_.host, opts_.port))
    return err("cannot bind %s:%d (in use, or not an address of this machine)", opts_.host.c_str(),
               opts_.port);
  return opts_.port;
}

void HttpServer::run() {
  http_->listen_after_bind();
}

void HttpServer::stop() {
  if (http_) http_->stop();
}

void HttpServer::routes() {
  httplib::Server& s = *http_;
  s.set_payload_max_length(opts_.max_body_bytes);
  s.set_tcp_nodelay(true);  // SSE: one small write per token must not wait for the last one's ACK
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a handler already wrote its error
    if (res.status == 404) return send_error(res, 404, "no route for " + req.method + " " + req.path);
    if (res.status == 413) return send_error(res, 413, "request body is larger than the server's limit");
    send_error(res, res.status, "HTTP error " + std::to_string(res.status));
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = std::string("internal error: ") + e.what();
    } catch (...) {
    }
    send_error(res, 500, what);
  });
  auto authorized = [this](const httplib::Request& req, httplib::Response& res) {
    if (opts_.api_key.empty()) return true;
    if (req.get_header_value("Authorization") == "Bearer " + opts_.api_key) return true;
    send_error(res, 401, "missing or wrong API key (Authorization: Bearer KEY)");
    return false;
  };

  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const EngineCounters c = engine_.counters();
    send_json(res, 200,
              json{{"status", "ok"},
                   {"slots_idle", engine_.n_slots() - c.running},
                   {"slots_processing", c.running},
                   {"requests_waiting", c.waiting}});
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(engine_.metrics_text(), "text/plain; version=0.0.4");
  });
  // Routes whose answer is one JSON body (server/text_routes.h), behind the API key.
  using Reply = std::function<ApiReply(const httplib::Request&)>;
  auto json_route = [this, authorized](Reply f) {
    return [authorized, f](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req, res)) return;
      const ApiReply r = f(req);
      send_json(res, r.status, r.body);
    };
  };
  for (const char* p : {"/v1/models", "/models"})
    s.Get(p, json_route([this](const httplib::Request&) { return models_reply(api_context()); }));
  for (const char* p : {"/v1/models/(.+)", "/models/(.+)"})
    s.Get(p,
          json_route([this](const httplib::Request& q) { return model_reply(api_context(), q.matches[1]); }));
  for (const char* p : {"/tokenize", "/v1/tokenize"})
    s.Post(p,
           json_route([this](const httplib::Request& q) { return tokenize_reply(api_context(), q.body); }));
  for (const char* p : {"/detokenize", "/v1/detokenize"})
    s.Post(p,
           json_route([this](const httplib::Request& q) { return detokenize_reply(api_context(), q.body); }));
  s.Post("/apply-template", json_route([this](const httplib::Request& q) {
           return apply_template_reply(api_context(), q.body);
         }));
  if (!opts_.cors_origins.empty()) {
    // CORS: an allowed origin's requests carry Access-Control-Allow-Origin (SSE included); a
    // preflight (OPTIONS) is answered here, 204, without the API key.
    s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      const std::string allow = cors_allow_origin(opts_.cors_origins, req.get_header_value("Origin"));
      if (!allow.empty()) {
        res.set_header("Access-Control-Allow-Origin", allow);
        res.set_header("Vary", "Origin");
      }
      if (req.method != "OPTIONS") return httplib::Server::HandlerResponse::Unhandled;
      res.status = 204;
      if (!allow.empty()) {
        const std::string want = req.get_header_value("Access-Control-Request-Headers");
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        res.set_header("Access-Control-Allow-Headers", want.empty() ? "Authorization, Content-Type" : want);
        res.set_header("Access-Control-Max-Age", "600");
      }
      return httplib::Server::HandlerResponse::Handled;
    });
  }

  auto completion = [this, authorized](const httplib::Request& req, httplib::Response& res, bool chat) {
    if (!authorized(req, res)) return;
    ApiError e;
    auto job = CompletionJob::start(api_context(), next_id_++, req.body, chat, &e);
    if (!job) return send_error(res, e.status, e.message);
    if (!job->stream()) {
      auto [status, body] = job->wait();
      return send_json(res, status, body);
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [job](size_t, httplib::DataSink& sink) {
          try {
            return stream_step(*job, sink);
          } catch (...) {  // never let an exception end the process from a server thread
            return false;
          }
        },
        [job](bool) { job->close(); });
  };

  for (const char* p : {"/v1/completions", "/completions"})
    s.Post(p, [completion](const httplib::Request& q, httplib::Response& r) { completion(q, r, false); });
  for (const char* p : {"/v1/chat/completions", "/chat/completions"})
    s.Post(p, [completion](const httplib::Request& q, httplib::Response& r) { completion(q, r, true); });
}

}  // namespace strata::server
