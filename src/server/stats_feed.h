// The live dashboard's routes (issue 18), served from the server's I/O thread:
//   GET /, /dashboard        the page (server/web/dashboard.html, embedded in the binary; no key: it
//                            holds no numbers, and asks for the key when the stream needs one)
//   GET /v1/strata/stats     one snapshot (server/stats_json.h)
//   GET /v1/strata/events    server-sent events: "event: stats" with a snapshot every interval
//                            (?interval_ms=, 100..10000, default 1000), heat map included; ends with
//                            "event: end" when the server stops
// The snapshots and the stream are behind the API key like every other data route. Subscribers are
// written to by one timer, armed only while a stream is open.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "server/http_exchange.h"

namespace strata::server {

struct Route;

class StatsFeed {
 public:
  // engine must outlive the feed; the feed must be destroyed before ioc.
  StatsFeed(boost::asio::io_context& ioc, const Engine& engine, std::string model_name);
  std::vector<Route> routes();
  void stop();  // I/O thread: no more ticks (the streams themselves end with their connections)

 private:
  struct Subscriber {
    std::shared_ptr<Exchange> ex;
    double interval_s = 1;
    double next_s = 0;  // now_seconds() of its next event
  };
  std::string event_text() const;
  void subscribe(const std::shared_ptr<Exchange>& ex);
  void arm();
  void tick();

  const Engine& engine_;
  std::string model_name_;
  double t_start_ = 0;
  boost::asio::steady_timer timer_;
  std::vector<Subscriber> subs_;
  bool armed_ = false, stopped_ = false;
};

// The dashboard page's HTML.
const std::string& dashboard_html();

}  // namespace strata::server
