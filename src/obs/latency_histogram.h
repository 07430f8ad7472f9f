// A latency histogram for serving metrics (TTFT, time per output token, queue wait): Prometheus
// buckets (cumulative counts, sum, count) plus exact percentiles over the most recent samples.
//
//   LatencyHistogram h;          // default buckets: 1 ms .. 60 s
//   h.add(0.042);                // seconds
//   h.percentile(0.99);          // over the last kWindow samples; 0 when empty
//   h.prometheus("strata_ttft_seconds", "time to first token", &out);
//
// Thread-safe: the engine adds, the HTTP thread reads.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace strata {

class LatencyHistogram {
 public:
  static constexpr size_t kWindow = 4096;  // samples kept for percentiles

  LatencyHistogram();                                           // buckets 0.001 .. 60 s, roughly x2.5 apart
  explicit LatencyHistogram(std::vector<double> upper_bounds);  // ascending, seconds

  void add(double seconds);
  uint64_t count() const;
  double sum() const;
  // Nearest-rank percentile (q in [0, 1]) of the last kWindow samples; 0 when there are none.
  double percentile(double q) const;
  // Appends `# HELP`, `# TYPE name histogram`, name_bucket{le=".."} lines, name_sum, name_count.
  void prometheus(const std::string& name, const std::string& help, std::string* out) const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> buckets_;  // per bound (not cumulative); +Inf is count_
  uint64_t count_ = 0;
  double sum_ = 0;
  std::vector<double> recent_;  // ring of the last kWindow samples
  size_t next_ = 0;
};

// Prometheus text helpers: "# HELP name help\n# TYPE name type\nname value\n".
void prometheus_scalar(const std::string& name, const char* type, const std::string& help, double value,
                       std::string* out);

}  // namespace strata
