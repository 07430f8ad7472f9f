// Test helper: assemble GGUF bytes field by field, so tests can build exactly the malformed file
// a validation rule is about.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace strata::testing {

struct GgufBytes {
  std::vector<uint8_t> b;

  template <class T>
  GgufBytes& put(T x) {
    const auto* p = reinterpret_cast<const uint8_t*>(&x);
    b.insert(b.end(), p, p + sizeof(T));
    return *this;
  }
  GgufBytes& str(std::string_view s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  GgufBytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    put<uint32_t>(version);
    put<uint64_t>(n_tensors);
    return put<uint64_t>(n_kv);
  }
  GgufBytes& kv_u32(std::string_view key, uint32_t v) { return str(key).put<uint32_t>(4).put<uint32_t>(v); }
  GgufBytes& kv_str(std::string_view key, std::string_view v) { return str(key).put<uint32_t>(8).str(v); }
  GgufBytes& tensor(std::string_view name, const std::vector<int64_t>& ne, uint32_t type, uint64_t offset) {
    str(name).put<uint32_t>(static_cast<uint32_t>(ne.size()));
    for (int64_t n : ne) put<int64_t>(n);
    return put<uint32_t>(type).put<uint64_t>(offset);
  }
  GgufBytes& pad(size_t alignment) {
    while (b.size() % alignment) b.push_back(0);
    return *this;
  }
  GgufBytes& zeros(size_t n) {
    b.insert(b.end(), n, 0);
    return *this;
  }
  template <class T>
  void patch(size_t at, T x) {
    std::memcpy(b.data() + at, &x, sizeof(T));
  }
};

}  // namespace strata::testing
