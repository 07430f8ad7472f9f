#include "memory/io/io_queue.h"

#include <algorithm>

#include "base/assert.h"

namespace strata {

IoQueue::IoQueue(int n_threads, Handler handler) : handler_(std::move(handler)) {
  STRATA_ASSERT(n_threads >= 1);
  threads_.reserve(static_cast<size_t>(n_threads));
  for (int i = 0; i < n_threads; ++i) threads_.emplace_back([this] { worker(); });
}

IoQueue::~IoQueue() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    urgent_.clear();
    normal_.clear();
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void IoQueue::submit(uint32_t job, bool urgent) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    (urgent ? urgent_ : normal_).push_back(job);
  }
  cv_.notify_one();
}

bool IoQueue::promote(uint32_t job) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = std::find(normal_.begin(), normal_.end(), job);
  if (it == normal_.end()) return false;
  normal_.erase(it);
  urgent_.push_front(job);
  return true;
}

std::vector<uint32_t> IoQueue::drain() {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<uint32_t> out(urgent_.begin(), urgent_.end());
  out.insert(out.end(), normal_.begin(), normal_.end());
  urgent_.clear();
  normal_.clear();
  return out;
}

size_t IoQueue::queued() const {
  std::lock_guard<std::mutex> lk(mu_);
  return urgent_.size() + normal_.size();
}

void IoQueue::worker() {
  for (;;) {
    uint32_t job = 0;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !urgent_.empty() || !normal_.empty(); });
      if (stop_) return;
      std::deque<uint32_t>& q = urgent_.empty() ? normal_ : urgent_;
      job = q.front();
      q.pop_front();
    }
    handler_(job);
  }
}

}  // namespace strata
