#include "server/stats_feed.h"

#include <algorithm>
#include <charconv>

#include "base/clock.h"
#include "server/http_server.h"
#include "server/stats_json.h"

namespace strata::server {

namespace {

constexpr const char kDashboardHtml[] =
#include "dashboard.html.inc"
    ;

// ?interval_ms=N in a raw query, clamped to [100, 10000]; 1000 when absent or not a number.
double interval_from_query(const std::string& query) {
  const std::string key = "interval_ms=";
  size_t p = 0;
  while (p < query.size()) {
    const size_t end = std::min(query.find('&', p), query.size());
    if (query.compare(p, key.size(), key) == 0) {
      int ms = 0;
      const char* b = query.data() + p + key.size();
      const auto r = std::from_chars(b, query.data() + end, ms);
      if (r.ec == std::errc() && r.ptr == query.data() + end) return std::clamp(ms, 100, 10000) / 1000.0;
    }
    p = end + 1;
  }
  return 1.0;
}

}  // namespace

const std::string& dashboard_html() {
  static const std::string html(kDashboardHtml);
  return html;
}

StatsFeed::StatsFeed(boost::asio::io_context& ioc, const Engine& engine, std::string model_name)
    : engine_(engine), model_name_(std::move(model_name)), t_start_(now_seconds()), timer_(ioc) {}

std::string StatsFeed::event_text() const {
  const nlohmann::json j = stats_json(engine_, model_name_, now_seconds() - t_start_, /*with_heat=*/true);
  return "event: stats\ndata: " + j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

std::vector<Route> StatsFeed::routes() {
  auto page = [](const std::shared_ptr<Exchange>& ex) {
    ex->respond(
        HttpResponse{200, "text/html; charset=utf-8", dashboard_html(), {{"Cache-Control", "no-cache"}}});
  };
  auto stats = [this](const std::shared_ptr<Exchange>& ex) {
    ex->respond(json_response(200, stats_json(engine_, model_name_, now_seconds() - t_start_, true)));
  };
  auto events = [this](const std::shared_ptr<Exchange>& ex) { subscribe(ex); };
  // {method, path, prefix, needs the API key, runs on a worker, handler}
  return {
      {"GET", "/", false, false, false, page},
      {"GET", "/dashboard", false, false, false, page},
      {"GET", "/v1/strata/stats", false, true, false, stats},
      {"GET", "/v1/strata/events", false, true, false, events},
  };
}

void StatsFeed::subscribe(const std::shared_ptr<Exchange>& ex) {
  if (stopped_) return ex->respond(error_response(503, "server shutting down"));
  ex->begin_stream("text/event-stream", "event: end\ndata: {}\n\n");
  ex->write(event_text());
  const double interval = interval_from_query(ex->request().query);
  subs_.push_back(Subscriber{ex, interval, now_seconds() + interval});
  arm();
}

void StatsFeed::arm() {
  if (armed_ || stopped_ || subs_.empty()) return;
  double next = subs_.front().next_s;
  for (const Subscriber& s : subs_) next = std::min(next, s.next_s);
  armed_ = true;
  // At most 100 ms ahead: a subscriber that arrives meanwhile with a shorter interval waits no longer.
  const double wait = std::clamp(next - now_seconds(), 0.0, 0.1);
  timer_.expires_after(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(wait)));
  timer_.async_wait([this](boost::system::error_code ec) {
    armed_ = false;
    if (!ec) tick();
  });
}

void StatsFeed::tick() {
  std::erase_if(subs_, [](const Subscriber& s) { return !s.ex->open(); });
  const double now = now_seconds();
  std::string text;  // one snapshot for every subscriber due now
  for (Subscriber& s : subs_) {
    if (s.next_s > now + 0.005) continue;
    if (text.empty()) text = event_text();
    s.ex->write(text);
    s.next_s = now + s.interval_s;
  }
  arm();
}

void StatsFeed::stop() {
  stopped_ = true;
  timer_.cancel();
  subs_.clear();
}

}  // namespace strata::server
