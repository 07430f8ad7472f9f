// EventChannel: hands a request's CompletionEvents from the engine's scheduler thread to the HTTP
// thread that answers it. close() (the client went away) makes the engine's next push fail, which
// cancels the request and frees its slot.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>

#include "runtime/engine.h"

namespace strata::server {

class EventChannel {
 public:
  bool push(const CompletionEvent& ev) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (closed_) return false;
      q_.push_back(ev);
    }
    cv_.notify_one();
    return true;
  }
  CompletionEvent pop() {  // blocks until an event arrives
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return !q_.empty(); });
    CompletionEvent ev = std::move(q_.front());
    q_.pop_front();
    return ev;
  }
  void close() {
    std::lock_guard<std::mutex> lk(mu_);
    closed_ = true;
  }
  // The sink to give Engine::submit (keeps the channel alive while the engine holds it).
  static CompletionSink sink(const std::shared_ptr<EventChannel>& ch) {
    return [ch](const CompletionEvent& ev) { return ch->push(ev); };
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<CompletionEvent> q_;
  bool closed_ = false;
};

}  // namespace strata::server
