#include "obs/latency_histogram.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "obs/bench_stats.h"

namespace strata {

LatencyHistogram::LatencyHistogram()
    : LatencyHistogram({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}) {}

LatencyHistogram::LatencyHistogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), buckets_(bounds_.size(), 0) {
  std::sort(bounds_.begin(), bounds_.end());
  recent_.reserve(kWindow);
}

void LatencyHistogram::add(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) seconds = 0;
  std::lock_guard<std::mutex> lk(mu_);
  const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), seconds);
  if (it != bounds_.end()) ++buckets_[static_cast<size_t>(it - bounds_.begin())];
  ++count_;
  sum_ += seconds;
  if (recent_.size() < kWindow) {
    recent_.push_back(seconds);
  } else {
    recent_[next_] = seconds;
    next_ = (next_ + 1) % kWindow;
  }
}

uint64_t LatencyHistogram::count() const {
  std::lock_guard<std::mutex> lk(mu_);
  return count_;
}

double LatencyHistogram::sum() const {
  std::lock_guard<std::mutex> lk(mu_);
  return sum_;
}

double LatencyHistogram::percentile(double q) const {
  std::vector<double> v;
  {
    std::lock_guard<std::mutex> lk(mu_);
    v = recent_;
  }
  std::sort(v.begin(), v.end());
  return nearest_rank(v, q);
}

namespace {

// The shortest of %.15g / %.17g that reads back as v ("0.1", not "0.10000000000000001").
std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.15g", v);
  if (std::strtod(b, nullptr) != v) std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

}  // namespace

void LatencyHistogram::prometheus(const std::string& name, const std::string& help, std::string* out) const {
  std::lock_guard<std::mutex> lk(mu_);
  *out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += buckets_[i];
    *out += name + "_bucket{le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cum) + "\n";
  }
  *out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  *out += name + "_sum " + num(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

void prometheus_scalar(const std::string& name, const char* type, const std::string& help, double value,
                       std::string* out) {
  *out +=
      "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + num(value) + "\n";
}

}  // namespace strata
