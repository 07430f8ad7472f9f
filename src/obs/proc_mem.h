// Process memory as the kernel reports it (/proc/self/status): resident set now and its peak.
// Used to check measured peaks against the memory plan (`run`/`bench` print them at exit).
#pragma once

#include <cstdint>

namespace strata {

uint64_t rss_bytes();       // VmRSS, 0 when unavailable
uint64_t peak_rss_bytes();  // VmHWM, 0 when unavailable

}  // namespace strata
