#include "base/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace strata {

Result<uint64_t> parse_size(std::string_view text) {
  std::string s(text);
  if (s.empty()) return err("empty size");
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !std::isfinite(v) || v < 0) return err("invalid size '%s'", s.c_str());
  std::string suf(end);
  for (auto& c : suf) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double mul = 1;
  if (suf.empty() || suf == "B")
    mul = 1;
  else if (suf == "K" || suf == "KB" || suf == "KIB")
    mul = 1024.0;
  else if (suf == "M" || suf == "MB" || suf == "MIB")
    mul = 1024.0 * 1024;
  else if (suf == "G" || suf == "GB" || suf == "GIB")
    mul = 1024.0 * 1024 * 1024;
  else if (suf == "T" || suf == "TB" || suf == "TIB")
    mul = 1024.0 * 1024 * 1024 * 1024;
  else
    return err("invalid size suffix in '%s' (use K, M, G or T)", s.c_str());
  const double bytes = v * mul;
  if (bytes > 1.8e19) return err("size '%s' is too large", s.c_str());
  return static_cast<uint64_t>(std::llround(bytes));
}

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace strata
