#include "obs/proc_mem.h"

#include <cstdio>
#include <cstring>

namespace strata {

namespace {

uint64_t status_kib(const char* key) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  uint64_t v = 0;
  const size_t n = std::strlen(key);
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, key, n) == 0 && line[n] == ':') {
      unsigned long long kib = 0;
      if (std::sscanf(line + n + 1, "%llu", &kib) == 1) v = kib * 1024;
      break;
    }
  }
  std::fclose(f);
  return v;
}

}  // namespace

uint64_t rss_bytes() {
  return status_kib("VmRSS");
}
uint64_t peak_rss_bytes() {
  return status_kib("VmHWM");
}

}  // namespace strata
