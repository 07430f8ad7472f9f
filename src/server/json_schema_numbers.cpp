#include "server/json_schema_numbers.h"

#include <string>
#include <vector>

namespace strata::server {

namespace {

constexpr int kMaxDigits = 16;  // of an unbounded integer part

std::string digits(size_t n) {
  return n == 0 ? "" : n == 1 ? "[0-9]" : "[0-9]{" + std::to_string(n) + "}";
}

std::string cls(char a, char b) {
  if (a == b) return std::string("\"") + a + "\"";
  return std::string("[") + a + "-" + b + "]";
}

// Decimal strings of x.size() digits from x to y (same length, x <= y), leading zeros allowed.
std::string same_length(const std::string& x, const std::string& y) {
  if (x.empty()) return "";
  if (x[0] == y[0]) {
    const std::string rest = same_length(x.substr(1), y.substr(1));
    return cls(x[0], x[0]) + (rest.empty() ? "" : " " + rest);
  }
  const std::string xr = x.substr(1), yr = y.substr(1);
  const bool x_low = xr.find_first_not_of('0') == std::string::npos;
  const bool y_high = yr.find_first_not_of('9') == std::string::npos;
  std::vector<std::string> alts;
  auto seq = [](const std::string& a, const std::string& b) { return b.empty() ? a : a + " " + b; };
  char lo = x[0], hi = y[0];
  if (!x_low) {
    alts.push_back(seq(cls(x[0], x[0]), "(" + same_length(xr, std::string(xr.size(), '9')) + ")"));
    ++lo;
  }
  if (!y_high) --hi;
  if (lo <= hi) alts.push_back(seq(cls(lo, hi), digits(xr.size())));
  if (!y_high) alts.push_back(seq(cls(y[0], y[0]), "(" + same_length(std::string(yr.size(), '0'), yr) + ")"));
  std::string out;
  for (const std::string& a : alts) out += (out.empty() ? "" : " | ") + a;
  return alts.size() == 1 ? out : "(" + out + ")";
}

// Naturals in [a, b] without leading zeros; b < 0: no upper bound (kMaxDigits digits at most, or
// a's length when longer).
std::string natural_range(uint64_t a, int64_t b_signed) {
  const bool open = b_signed < 0;
  const uint64_t b = open ? 0 : static_cast<uint64_t>(b_signed);
  const std::string as = std::to_string(a);
  const size_t max_len = open ? std::max<size_t>(as.size(), kMaxDigits) : std::to_string(b).size();
  std::vector<std::string> alts;
  for (size_t len = as.size(); len <= max_len; ++len) {
    std::string lo = len == as.size() ? as : "1" + std::string(len - 1, '0');
    std::string hi = std::string(len, '9');
    if (!open && len == max_len) hi = std::to_string(b);
    if (open && len > as.size()) {  // every number of this length and longer, at once
      alts.push_back("[1-9] [0-9]{" + std::to_string(len - 1) + "," + std::to_string(max_len - 1) + "}");
      break;
    }
    alts.push_back(same_length(lo, hi));
  }
  std::string out;
  for (const std::string& a2 : alts) out += (out.empty() ? "" : " | ") + a2;
  return alts.size() == 1 ? out : "(" + out + ")";
}

std::string join(const std::vector<std::string>& alts) {
  std::string out;
  for (const std::string& a : alts) out += (out.empty() ? "" : " | ") + a;
  return out.empty() ? out : "(" + out + ")";
}

constexpr const char* kFrac = "(\".\" [0-9]{1,16})";
constexpr const char* kZeroFrac = "(\".\" \"0\"{1,16})";
constexpr const char* kNonZeroFrac = "(\".\" \"0\"{0,15} [1-9] [0-9]{0,15})";

// Magnitudes m (integer part M, fraction F) with p <(=) M.F <(=) q; q < 0: no upper bound.
std::string magnitude_range(uint64_t p, bool p_excl, int64_t q, bool q_excl) {
  std::vector<std::string> alts;
  if (q >= 0 && static_cast<uint64_t>(q) < p) return "";
  if (q >= 0 && static_cast<uint64_t>(q) == p) {
    if (!p_excl && !q_excl) alts.push_back("\"" + std::to_string(p) + "\" " + kZeroFrac + "?");
    return join(alts);
  }
  // M = p; then p < M < q with any fraction; then M = q.
  alts.push_back("\"" + std::to_string(p) + "\" " +
                 (p_excl ? std::string(kNonZeroFrac) : std::string(kFrac) + "?"));
  if (q < 0 || static_cast<uint64_t>(q) > p + 1)
    alts.push_back(natural_range(p + 1, q < 0 ? -1 : q - 1) + " " + kFrac + "?");
  if (q >= 0 && !q_excl) alts.push_back("\"" + std::to_string(q) + "\" " + kZeroFrac + "?");
  return join(alts);
}

uint64_t magnitude(int64_t v) {
  return v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
}

}  // namespace

std::string integer_range_grammar(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<std::string> alts;
  if (lo && hi && *lo > *hi) return "";
  // Non-negative part: [max(lo, 0), hi].
  if (!hi || *hi >= 0) {
    const uint64_t a = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    alts.push_back(natural_range(a, hi ? *hi : -1));
  }
  // Negative part: [lo, min(hi, -1)] as "-" and a magnitude in [max(-hi, 1), -lo].
  if (!lo || *lo < 0) {
    const uint64_t a = hi && *hi < 0 ? magnitude(*hi) : 1;
    const int64_t b = lo ? static_cast<int64_t>(std::min<uint64_t>(magnitude(*lo), INT64_MAX)) : -1;
    alts.push_back("\"-\" " + natural_range(a, b));
  }
  return join(alts);
}

std::string number_range_grammar(std::optional<int64_t> lo, bool lo_excl, std::optional<int64_t> hi,
                                 bool hi_excl) {
  std::vector<std::string> alts;
  // Non-negative part: magnitudes from max(lo, 0) to hi.
  if (!hi || *hi > 0 || (*hi == 0 && !hi_excl)) {
    const bool from_lo = lo && *lo >= 0;
    std::string pos = magnitude_range(from_lo ? static_cast<uint64_t>(*lo) : 0, from_lo && lo_excl,
                                      hi ? *hi : -1, hi && hi_excl);
    if (!pos.empty()) alts.push_back(pos);
  }
  // Negative part: "-" and magnitudes from max(-hi, 0) (exclusive where hi is) to -lo.
  if (!lo || *lo < 0) {
    const bool from_hi = hi && *hi <= 0;
    std::string neg = magnitude_range(
        from_hi ? magnitude(*hi) : 0, from_hi ? hi_excl || *hi == 0 : true,
        lo ? static_cast<int64_t>(std::min<uint64_t>(magnitude(*lo), INT64_MAX)) : -1, lo && lo_excl);
    if (!neg.empty()) alts.push_back("\"-\" " + neg);
  }
  return join(alts);
}

}  // namespace strata::server
