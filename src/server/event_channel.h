// EventChannel: hands a response's CompletionEvents from the engine's scheduler thread to the HTTP
// thread that answers it, each tagged with its choice (one engine request per prompt of the
// response). close() (the client went away) makes the engine's next push fail, which cancels the
// requests and frees their slots.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <utility>

#include "runtime/engine.h"

namespace strata::server {

class EventChannel {
 public:
  bool push(const CompletionEvent& ev, int choice = 0) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (closed_) return false;
      q_.emplace_back(choice, ev);
    }
    cv_.notify_one();
    return true;
  }
  CompletionEvent pop(int* choice = nullptr) {  // blocks until an event arrives
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return !q_.empty(); });
    if (choice) *choice = q_.front().first;
    CompletionEvent ev = std::move(q_.front().second);
    q_.pop_front();
    return ev;
  }
  void close() {
    std::lock_guard<std::mutex> lk(mu_);
    closed_ = true;
  }
  // The sink to give Engine::submit (keeps the channel alive while the engine holds it).
  static CompletionSink sink(const std::shared_ptr<EventChannel>& ch, int choice = 0) {
    return [ch, choice](const CompletionEvent& ev) { return ch->push(ev, choice); };
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<int, CompletionEvent>> q_;
  bool closed_ = false;
};

}  // namespace strata::server
